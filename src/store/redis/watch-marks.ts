/**
 * The locks this instance watches, kept marked as watched in Redis (field w of the lock hash, set by
 * watch-mark.lua): the lock scripts publish a change notice only for a marked lock, so the many locks
 * nobody watches cost no PUBLISH. A mark lasts `keepMs` and is renewed every `refreshMs` while the
 * instance stays subscribed; once it is no longer renewed it runs out by itself (an instance that dies
 * leaves nothing behind). If a renewal finds the mark had run out (Redis was unreachable, or lost its
 * data), changes may have gone unannounced meanwhile: the lock's listeners are told to read it again.
 */
export class WatchMarks {
  /** Lock id -> what to do when its mark was found run out. */
  private readonly marked = new Map<string, () => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** Runs watch-mark.lua on a lock id; resolves to whether it was still marked. */
    private readonly mark: (id: string) => Promise<boolean>,
    private readonly refreshMs: number,
  ) {}

  /** Marks `id` (resolves once Redis has the mark) and keeps it marked until `delete(id)`. */
  async add(id: string, onLapse: () => void): Promise<void> {
    await this.mark(id);
    this.marked.set(id, onLapse);
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.refresh(), this.refreshMs);
      this.timer.unref();
    }
  }

  delete(id: string): void {
    this.marked.delete(id);
    if (this.marked.size === 0) this.close();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private refresh(): void {
    for (const [id, onLapse] of this.marked) {
      this.mark(id).then(
        (wasMarked) => {
          if (!wasMarked && this.marked.get(id) === onLapse) onLapse();
        },
        // Redis unreachable: the next renewal finds the mark run out and has the lock read again.
        () => undefined,
      );
    }
  }
}
