// The view follows the newest text unless the reader scrolled up; then a "Jump to newest"
// button brings them back (and following resumes at the bottom).
const SLACK_PX = 48; // this close to the bottom counts as at the bottom

export class Follow {
  constructor(scroller, jump) {
    this.scroller = scroller;
    this.jump = jump;
    this.following = true;
    // Only a reader's scroll changes this: growing content fires no scroll event.
    scroller.addEventListener("scroll", () => {
      this.following = this.atBottom();
      this.jump.hidden = this.following;
    });
    jump.addEventListener("click", () => this.toBottom());
  }

  atBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight <= SLACK_PX;
  }

  /** After the content changed: keep the newest in view, or offer to jump to it. */
  update() {
    if (this.following) {
      this.scroller.scrollTop = this.scroller.scrollHeight;
    } else {
      this.jump.hidden = this.atBottom();
    }
  }

  toBottom() {
    this.following = true;
    this.jump.hidden = true;
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }
}
