// Images attached to the next question, offered only when the model takes images: read
// from files as data: URLs (the page's content-security-policy allows those as images)
// and shown as thumbnails until the question is sent.
export class Attachments {
  constructor(box, input, preview) {
    this.box = box;
    this.input = input;
    this.preview = preview;
    this.urls = [];
    input.addEventListener("change", () => this.add([...input.files]));
  }

  /** Offer attaching (a vision model) or not (then what was attached is dropped). */
  enable(on) {
    this.box.hidden = !on;
    if (!on) this.take();
  }

  async add(files) {
    for (const file of files) {
      this.urls.push(await readAsDataURL(file));
    }
    this.input.value = "";
    this.show();
  }

  /** Attach these again (an edited question's). */
  put(urls) {
    this.urls = [...urls];
    this.show();
  }

  /** The attached images' URLs; the next question starts with none. */
  take() {
    const urls = this.urls;
    this.urls = [];
    this.show();
    return urls;
  }

  show() {
    this.preview.replaceChildren(
      ...this.urls.map((url, i) => {
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "attachment";
        remove.setAttribute("aria-label", `Remove image ${i + 1}`);
        remove.append(thumbnail(url));
        remove.addEventListener("click", () => {
          this.urls.splice(i, 1);
          this.show();
        });
        return remove;
      }),
    );
  }
}

/** An <img> of an attached image. */
export function thumbnail(url) {
  const img = document.createElement("img");
  img.className = "thumbnail";
  img.src = url;
  img.alt = "attached image";
  return img;
}

function readAsDataURL(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}
