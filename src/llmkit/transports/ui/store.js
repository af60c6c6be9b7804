// What the page keeps in this browser (localStorage): the conversations, which one is
// open, and the sampling settings. The API key is not here: it stays in the tab.
const CONVERSATIONS = "llmkit.conversations";
const CURRENT = "llmkit.currentConversation";
const SETTINGS = "llmkit.settings";

export const DEFAULT_SETTINGS = { system: "", temperature: "", top_p: "", max_tokens: "256" };

function read(key, fallback) {
  try {
    const value = JSON.parse(localStorage.getItem(key));
    return value ?? fallback;
  } catch {
    return fallback;
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Storage full or blocked: the page still works, it only forgets on reload.
  }
}

export function loadSettings() {
  return { ...DEFAULT_SETTINGS, ...read(SETTINGS, {}) };
}

export function saveSettings(settings) {
  write(SETTINGS, settings);
}

/** The conversations, newest first: {id, title, messages, updated}. */
export class Conversations {
  constructor() {
    this.all = read(CONVERSATIONS, []).filter((c) => c && Array.isArray(c.messages));
    const current = localStorage.getItem(CURRENT);
    this.current = this.all.find((c) => c.id === current) || this.all[0] || this.create();
  }

  create() {
    const conversation = {
      id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6),
      title: "New chat",
      messages: [],
      updated: Date.now(),
    };
    this.all.unshift(conversation);
    this.current = conversation;
    this.save();
    return conversation;
  }

  open(id) {
    this.current = this.all.find((c) => c.id === id) || this.current;
    this.save();
  }

  rename(id, title) {
    const conversation = this.all.find((c) => c.id === id);
    if (conversation && title.trim()) conversation.title = title.trim();
    this.save();
  }

  remove(id) {
    this.all = this.all.filter((c) => c.id !== id);
    if (this.current.id === id) this.current = this.all[0] || this.create();
    this.save();
  }

  /** Save after the open conversation changed; its first question names it. */
  touch() {
    const conversation = this.current;
    const first = conversation.messages.find((m) => m.role === "user");
    if (conversation.title === "New chat" && first) {
      conversation.title = first.content.slice(0, 40) || "New chat";
    }
    conversation.updated = Date.now();
    this.save();
  }

  save() {
    write(CONVERSATIONS, this.all);
    localStorage.setItem(CURRENT, this.current.id);
  }
}
