// One message of the conversation as the page shows it: who, reasoning (collapsible),
// text (markdown for the assistant), tool calls, a note (stopped, error) and its buttons.
import { thumbnail } from "./attach.js";
import { renderMarkdown } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(action, label) {
  const node = el("button", "action", label);
  node.type = "button";
  node.dataset.action = action;
  return node;
}

/** A new element for `message` ({role, content, images, reasoning, toolCalls, status, error}). */
export function messageElement(message) {
  const item = el("article", "message " + message.role);
  const who = el("h2", "", message.role === "user" ? "You" : "Assistant");
  const reasoning = el("details", "reasoning");
  reasoning.append(el("summary", "", "Reasoning"), el("div", "reasoning-text"));
  const tools = el("div", "tool-calls");
  const actions = el("div", "message-actions");
  item.append(who, reasoning, el("div", "text"), tools, el("p", "note"), actions);
  updateMessage(item, message);
  return item;
}

/** Show `message`'s current state in `item` (called as a reply streams). */
export function updateMessage(item, message) {
  const text = item.querySelector(".text");
  if (message.role === "assistant") {
    renderMarkdown(text, message.content || "");
  } else {
    text.replaceChildren(message.content, ...(message.images || []).map(thumbnail));
  }
  const reasoning = item.querySelector(".reasoning");
  reasoning.hidden = !message.reasoning;
  reasoning.querySelector(".reasoning-text").textContent = message.reasoning || "";
  const tools = item.querySelector(".tool-calls");
  tools.replaceChildren(
    ...(message.toolCalls || []).map((call) =>
      el("pre", "tool-call", `${call.function.name}(${call.function.arguments})`),
    ),
  );
  item.classList.toggle("stopped", message.status === "stopped");
  item.classList.toggle("failed", message.status === "failed");
  const note = item.querySelector(".note");
  note.textContent =
    message.status === "stopped"
      ? "stopped"
      : message.status === "failed"
        ? "Error: " + (message.error || "the request failed")
        : "";
  note.className = message.status === "failed" ? "note error" : "note";
  note.hidden = !note.textContent;
}

/** The buttons of a message: copy on every answer; edit and regenerate on the last turn. */
export function setActions(item, message, last, busy) {
  const actions = item.querySelector(".message-actions");
  const buttons = [];
  if (message.role === "assistant" && message.content) buttons.push(button("copy", "Copy"));
  if (last && !busy) {
    buttons.push(
      message.role === "user" ? button("edit", "Edit") : button("regenerate", "Regenerate"),
    );
  }
  actions.replaceChildren(...buttons);
}
