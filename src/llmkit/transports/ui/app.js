// The llmkit chat page: models from v1/models, replies streamed over v1/ws with the
// llmkit-ws.js client, conversations and settings kept in this browser. Every URL is
// relative to the page, so it works wherever the app is mounted.
import { Attachments } from "./attach.js";
import { Follow } from "./follow.js";
import { LlmkitClient } from "./llmkit-ws.js";
import { codeOf, copyText } from "./markdown.js";
import { messageElement, setActions, updateMessage } from "./render.js";
import { Conversations, loadSettings, saveSettings } from "./store.js";
import { conversationList, exportConversations, wireMessages } from "./chats.js";

const DEMO_MODEL = "demo"; // the random-weight demo, whatever name it is served under
const KEY_STORAGE = "llmkit.apiKey";
const RETRY_MS = 1500; // how often a page that lost the server looks for it again
const $ = (id) => document.getElementById(id);
const ui = {
  menu: $("menu"),
  side: $("side"),
  model: $("model"),
  badge: $("connection"),
  demoNote: $("demo-note"),
  keyForm: $("key-form"),
  keyHelp: $("key-help"),
  key: $("api-key"),
  list: $("conversations"),
  newChat: $("new-chat"),
  exportChats: $("export"),
  settings: $("settings"),
  conversation: $("conversation"),
  status: $("status"),
  chatForm: $("chat-form"),
  message: $("message"),
  send: $("send"),
  stop: $("stop"),
};
const SETTING_FIELDS = { system: "system", temperature: "temperature", top_p: "top-p", max_tokens: "max-tokens" };
const chats = new Conversations();
const follow = new Follow(ui.conversation, $("jump"));
const attachments = new Attachments($("attach"), $("image"), $("attachments"));
const settings = loadSettings();
let models = {}; // model id -> its /v1/models card
let chosenModel = ""; // kept while the list is away (no key, no server)
let client = null;
let current = null; // the reply streaming now: {stream, message, item}
let retry = null;

const apiKey = () => sessionStorage.getItem(KEY_STORAGE) || "";
const setStatus = (text) => {
  ui.status.textContent = text;
};

function emptyModels(why) {
  ui.model.replaceChildren(new Option(why, ""));
  ui.model.disabled = true;
  modelChosen();
}

// What the chosen model is: the demo (say its text is noise), one that takes images.
function modelChosen() {
  const card = models[ui.model.value];
  if (card) chosenModel = card.id;
  ui.demoNote.hidden = !card || card.root !== DEMO_MODEL;
  attachments.enable(Boolean(card && (card.input_modalities || []).includes("image")));
  updateSend();
}

function updateSend() {
  ui.send.disabled = ui.model.disabled || current !== null;
  ui.stop.disabled = current === null;
}

// Lists the models; false when the server is away or wants a (new) key.
async function loadModels() {
  const key = apiKey();
  let response;
  try {
    response = await fetch("v1/models", { headers: key ? { Authorization: "Bearer " + key } : {} });
  } catch {
    emptyModels("server unreachable");
    return false;
  }
  if (response.status === 401) {
    sessionStorage.removeItem(KEY_STORAGE);
    ui.keyHelp.textContent = key
      ? "The server refused that API key; enter another."
      : "This server needs an API key. It is kept in this tab only.";
    ui.keyForm.hidden = false;
    emptyModels("needs an API key");
    setStatus("An API key is needed.");
    ui.key.focus();
    return false;
  }
  if (!response.ok) {
    emptyModels(`listing failed (HTTP ${response.status})`);
    return false;
  }
  const cards = (await response.json()).data || [];
  models = Object.fromEntries(cards.map((m) => [m.id, m]));
  ui.keyForm.hidden = true;
  if (!cards.length) {
    emptyModels("the server lists no models");
    return true;
  }
  const chosen = (m) => m.id === chosenModel;
  // A server of several models says each one's state (loaded, loading, unloaded, failed).
  const label = (m) => (m.state ? `${m.id} (${m.state})` : m.id);
  ui.model.replaceChildren(...cards.map((m) => new Option(label(m), m.id, false, chosen(m))));
  ui.model.disabled = false;
  modelChosen();
  return true;
}

function setBadge(state, title = "") {
  ui.badge.textContent = state;
  ui.badge.className = "badge " + state;
  ui.badge.title = title;
}

// Connected once the models are listed and the socket is open; otherwise it looks again
// shortly (unless it waits for a key).
async function connect() {
  clearTimeout(retry);
  retry = null;
  if (!(await loadModels())) {
    setBadge("disconnected");
    if (ui.keyForm.hidden) retry = setTimeout(connect, RETRY_MS);
    return;
  }
  if (!client || client.apiKey !== apiKey()) {
    if (client) client.close(); // a new key: a new socket
    const mine = new LlmkitClient({ url: "v1/ws", apiKey: apiKey() });
    mine.addEventListener("state", (event) => mine === client && onState(event.detail));
    client = mine;
  }
  if (client.state === "closed") client.connect();
}

function onState({ state, reason, code, shuttingDown }) {
  if (state === "open") {
    if (!ui.status.textContent || ui.badge.textContent === "disconnected") setStatus("Ready.");
    setBadge("connected");
  } else if (state === "connecting") {
    if (ui.badge.textContent !== "disconnected") setBadge("connecting");
  } else if (code === 1000) {
    // The server closed a socket left idle (or the page replaced it): open one again.
    setBadge("connecting");
    if (retry === null) retry = setTimeout(connect, 0);
  } else {
    setBadge("disconnected", reason);
    setStatus(shuttingDown ? "The server is shutting down." : `Disconnected: ${reason}.`);
    if (retry === null) retry = setTimeout(connect, RETRY_MS); // looks for the server again
  }
}

function showConversation() {
  ui.conversation.replaceChildren(...chats.current.messages.map(messageElement));
  refreshActions();
  ui.list.replaceChildren(...conversationList(chats));
  follow.toBottom();
}

function refreshActions() {
  const messages = chats.current.messages;
  const items = ui.conversation.querySelectorAll(".message");
  const lastUser = messages.map((m) => m.role).lastIndexOf("user");
  messages.forEach((message, i) => {
    const last = message.role === "user" ? i === lastUser : i === messages.length - 1;
    setActions(items[i], message, last, current !== null);
  });
}

function requestBody() {
  const messages = wireMessages(chats.current.messages);
  if (settings.system.trim()) messages.unshift({ role: "system", content: settings.system });
  const body = { model: ui.model.value, messages, stream_options: { include_usage: true } };
  // An empty setting leaves the server's default.
  const numbers = { temperature: parseFloat, top_p: parseFloat, max_tokens: (v) => parseInt(v, 10) };
  for (const [name, parse] of Object.entries(numbers)) {
    const value = parse(settings[name]);
    if (!Number.isNaN(value)) body[name] = value;
  }
  return body;
}

function rate(reply) {
  const tokens = reply.usage ? reply.usage.completion_tokens : reply.chunks;
  const seconds = (performance.now() - reply.sentAt) / 1000;
  const parts = [`${tokens} tokens`, `${(tokens / Math.max(seconds, 1e-3)).toFixed(1)} tokens/s`];
  if (reply.firstAt) parts.push(`first token after ${Math.round(reply.firstAt - reply.sentAt)} ms`);
  return parts.join(" · ");
}

// Ask for the answer to the conversation as it stands (its last message is the question).
async function answer() {
  const message = { role: "assistant", content: "", reasoning: "", toolCalls: [] };
  const conversation = chats.current;
  const body = requestBody();
  conversation.messages.push(message);
  const item = messageElement(message);
  item.classList.add("streaming");
  item.querySelector(".reasoning").open = true; // reasoning shows as it streams
  ui.conversation.append(item);
  if (!client) await connect();
  if (!client) {
    message.status = "failed";
    message.error = "the server cannot be reached";
    updateMessage(item, message);
    item.classList.remove("streaming");
    return;
  }
  const stream = client.chat(body);
  const sentAt = performance.now();
  const reply = { stream, message, item, chunks: 0, usage: null, sentAt, firstAt: 0 };
  current = reply;
  updateSend();
  refreshActions();
  follow.toBottom();
  setStatus("Sending…");
  let drawn = false;
  try {
    for await (const delta of stream) {
      if (delta.content || delta.reasoning) {
        reply.firstAt = reply.firstAt || performance.now();
        reply.chunks += 1;
      }
      message.content += delta.content || "";
      message.reasoning += delta.reasoning || "";
      for (const call of delta.toolCalls || []) {
        const known = (message.toolCalls[call.index] ??= { function: { name: "", arguments: "" } });
        known.function.name += call.function?.name || "";
        known.function.arguments += call.function?.arguments || "";
      }
      if (delta.usage) reply.usage = delta.usage;
      if (!drawn) {
        drawn = true; // drawn once per frame, however many chunks came
        requestAnimationFrame(() => {
          drawn = false;
          if (current === reply) draw(reply, "Generating: ");
        });
      }
    }
  } catch (err) {
    message.status = "failed";
    message.error = err.message;
  }
  if (stream.status === "cancelled") message.status = "stopped";
  if (current === reply) current = null;
  item.classList.remove("streaming");
  if (!message.toolCalls.length) delete message.toolCalls;
  const ended = { failed: "", stopped: "Stopped: " }[message.status] ?? "Done: ";
  draw(reply, ended);
  if (message.status === "failed") setStatus("Failed."); // the reason is in the reply, once
  if (chats.all.includes(conversation)) chats.touch();
  updateSend();
  if (Object.values(models).some((m) => m.state)) loadModels(); // the reply loaded its model
  if (chats.current === conversation) refreshActions();
  ui.list.replaceChildren(...conversationList(chats));
  follow.update(); // the reply's buttons came last
}

function draw(reply, prefix) {
  updateMessage(reply.item, reply.message);
  if (prefix) setStatus(prefix + rate(reply));
  follow.update();
}

function ask(text) {
  const images = attachments.take();
  const question = { role: "user", content: text };
  if (images.length) question.images = images;
  chats.current.messages.push(question);
  chats.touch();
  ui.conversation.append(messageElement(chats.current.messages.at(-1)));
  answer();
}

function stopReply() {
  if (!current) return;
  ui.stop.disabled = true;
  setStatus("Stopping…");
  current.stream.cancel();
}

function onMessageAction(event) {
  const target = event.target.closest("button");
  if (!target) return;
  if (target.classList.contains("copy-code")) {
    copyText(target, codeOf(target));
    return;
  }
  const items = [...ui.conversation.querySelectorAll(".message")];
  const index = items.indexOf(target.closest(".message"));
  const messages = chats.current.messages;
  if (target.dataset.action === "copy") {
    copyText(target, messages[index].content);
  } else if (target.dataset.action === "edit" && !current) {
    // The question comes back to the box; sending it replaces the turn.
    ui.message.value = messages[index].content;
    attachments.put(messages[index].images || []);
    messages.splice(index);
    chats.touch();
    showConversation();
    setStatus("Edit the question and send it again.");
    ui.message.focus();
  } else if (target.dataset.action === "regenerate" && !current) {
    messages.splice(index);
    chats.touch();
    showConversation();
    answer();
  }
}

function busyNote() {
  setStatus("A reply is being written: stop it, or wait for it, first.");
}

function onListAction(event) {
  const target = event.target.closest("button");
  if (!target) return;
  if (current) return busyNote();
  const id = target.closest("li").dataset.id;
  const title = chats.all.find((c) => c.id === id).title;
  if (target.dataset.action === "open") {
    chats.open(id);
    showSide(false); // on a narrow screen, the conversation it opened
  } else if (target.dataset.action === "rename") {
    const renamed = prompt("Rename the conversation", title);
    if (renamed) chats.rename(id, renamed);
  } else if (target.dataset.action === "delete") {
    if (!confirm(`Delete the conversation "${title}"?`)) return;
    chats.remove(id);
  }
  showConversation();
}

// The side panel over the conversation (narrow screens; wide ones always show it).
function showSide(open) {
  ui.side.classList.toggle("open", open);
  ui.menu.setAttribute("aria-expanded", String(open));
}

function showSettings() {
  for (const [name, id] of Object.entries(SETTING_FIELDS)) $(id).value = settings[name];
}

ui.settings.addEventListener("input", () => {
  for (const [name, id] of Object.entries(SETTING_FIELDS)) settings[name] = $(id).value;
  saveSettings(settings);
});
ui.settings.addEventListener("submit", (event) => event.preventDefault());
ui.chatForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = ui.message.value.trim();
  if (!text || current || ui.send.disabled) return;
  ui.message.value = "";
  ask(text);
});
ui.message.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.chatForm.requestSubmit();
  }
});
ui.stop.addEventListener("click", stopReply);
ui.conversation.addEventListener("click", onMessageAction);
ui.list.addEventListener("click", onListAction);
ui.model.addEventListener("change", modelChosen);
ui.newChat.addEventListener("click", () => {
  if (current) return busyNote();
  chats.create();
  showConversation();
  showSide(false);
  setStatus("New chat.");
  ui.message.focus();
});
ui.exportChats.addEventListener("click", () => exportConversations(chats.all));
ui.menu.addEventListener("click", () => showSide(!ui.side.classList.contains("open")));
ui.keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORAGE, ui.key.value.trim());
  ui.key.value = "";
  connect(); // with the new key: a new socket
});

showSettings();
showConversation();
setBadge("connecting");
connect();
