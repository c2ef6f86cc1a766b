/**
 * The locks this instance watches, kept marked as watched in Redis (field w of the lock hash, set by
 * watch-mark.lua): the lock scripts publish a change notice only for a marked lock, so the many locks
 * nobody watches cost no PUBLISH. A mark lasts `keepMs` and is renewed every `refreshMs` while the
 * instance stays subscribed; once it is no longer renewed it runs out by itself (an instance that dies
 * leaves nothing behind). If a renewal finds the mark had run out (Redis was unreachable, or lost its
 * data), changes may have gone unannounced meanwhile: the lock's listeners are told to read it again.
 */
/** 32: renewals in flight at once; another caller's command waits behind at most these. */
const REFRESH_BATCH = 32;

export class WatchMarks {
  /** Lock id -> what to do when its mark was found run out. */
  private readonly marked = new Map<string, () => void>();
  private timer: NodeJS.Timeout | undefined;
  /** A renewal pass is under way (a slow one is not overlapped by the next). */
  private refreshing = false;

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
    if (this.refreshing) return;
    this.refreshing = true;
    void this.refreshAll().finally(() => (this.refreshing = false));
  }

  /**
   * Renews every mark, REFRESH_BATCH at a time: a thousand watched locks sent at once would queue
   * every other caller's command behind a thousand scripts, on this connection and in Redis.
   */
  private async refreshAll(): Promise<void> {
    const entries = [...this.marked];
    for (let i = 0; i < entries.length; i += REFRESH_BATCH) {
      await Promise.all(
        entries.slice(i, i + REFRESH_BATCH).map(([id, onLapse]) =>
          this.mark(id).then(
            (wasMarked) => {
              if (!wasMarked && this.marked.get(id) === onLapse) onLapse();
            },
            // Redis unreachable: the next renewal finds the mark run out and has the lock read again.
            () => undefined,
          ),
        ),
      );
    }
  }
}
