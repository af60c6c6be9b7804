// Replies as markdown, the one way model text becomes HTML on the page: marked renders
// with the reply's own HTML escaped (shown as text, never parsed: even a sanitizer's parse
// of an inline handler counts against the page's CSP) and images shown as links (no fetch
// from elsewhere); DOMPurify then keeps only inert HTML, handed over as nodes rather than
// as a string parsed again; each code block gets a copy button.
import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const marked = new Marked({ gfm: true });
marked.use({
  renderer: {
    html: (html) => escapeHtml(html),
    image: (href, title, text) =>
      `<a href="${escapeHtml(href || "")}">${escapeHtml(text || href || "")}</a>`,
  },
});

/** Render `text` (markdown) into `element`, replacing what it held. */
export function renderMarkdown(element, text) {
  const html = marked.parse(text);
  element.replaceChildren(
    DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, RETURN_DOM_FRAGMENT: true }),
  );
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
