// The conversations list of the side panel, export as JSON, and what of a conversation
// is sent to the server.

function button(action, label, title) {
  const node = document.createElement("button");
  node.type = "button";
  node.dataset.action = action;
  node.textContent = label;
  if (title) node.setAttribute("aria-label", title);
  return node;
}

/** One list item per conversation: open (its title), rename, delete. */
export function conversationList(chats) {
  return chats.all.map((conversation) => {
    const item = document.createElement("li");
    item.dataset.id = conversation.id;
    const open = button("open", conversation.title);
    open.className = "open";
    if (conversation === chats.current) open.setAttribute("aria-current", "true");
    item.append(
      open,
      button("rename", "✎", `Rename ${conversation.title}`),
      button("delete", "✕", `Delete ${conversation.title}`),
    );
    return item;
  });
}

/** Download every conversation as one JSON file. */
export function exportConversations(all) {
  const blob = new Blob([JSON.stringify(all, null, 2)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = "llmkit-conversations.json";
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 0);
}

/** The messages to send: a question whose answer failed or came back empty is left out. */
export function wireMessages(messages) {
  const wire = [];
  messages.forEach((message, i) => {
    const next = messages[i + 1];
    const unanswered = next && next.role === "assistant" && !next.content;
    if (message.role === "user" && !unanswered) wire.push(question(message));
    if (message.role === "assistant" && message.content) {
      wire.push({ role: "assistant", content: message.content });
    }
  });
  return wire;
}

/** A question as the server takes it: text, or text and images (OpenAI's content parts). */
function question(message) {
  if (!message.images || !message.images.length) return { role: "user", content: message.content };
  const images = message.images.map((url) => ({ type: "image_url", image_url: { url } }));
  return { role: "user", content: [{ type: "text", text: message.content }, ...images] };
}
