// Replies as markdown: marked renders, DOMPurify keeps only inert HTML (no scripts, no
// handlers), and each code block gets a copy button.
import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

const marked = new Marked({ gfm: true });

/** Render `text` (markdown) into `element`, replacing what it held. */
export function renderMarkdown(element, text) {
  const html = DOMPurify.sanitize(marked.parse(text), { USE_PROFILES: { html: true } });
  element.innerHTML = html;
  for (const pre of element.querySelectorAll("pre")) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-code";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy code");
    pre.prepend(button);
  }
}

/** Copy `text` to the clipboard and say so on `button` for a moment. */
export async function copyText(button, text) {
  const label = button.dataset.label || (button.dataset.label = button.textContent);
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  setTimeout(() => {
    button.textContent = label;
  }, 1500);
}

/** The code of the block a copy button belongs to. */
export function codeOf(button) {
  const code = button.closest("pre").querySelector("code");
  return code ? code.textContent : "";
}
