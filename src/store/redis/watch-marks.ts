/**
 * The locks this instance watches, kept marked as watched in Redis (field w of the lock hash, set by
 * watch-mark.lua): the lock scripts publish a change notice only for a marked lock, so the many locks
 * nobody watches cost no PUBLISH. A mark lasts `keepMs` and is renewed every `refreshMs` while the
 * instance stays subscribed; once it is no longer renewed it runs out by itself (an instance that dies
 * leaves nothing behind). If a renewal finds the mark had run out (Redis was unreachable, or lost its
 * data), changes may have gone unannounced meanwhile: the lock's listeners are told to read it again.
 *
 * Each mark has its own renewal time, drawn at random within the first `refreshMs` after it was added
 * and then every `refreshMs` from there; a pass every `refreshMs / SLICES` renews only the marks then
 * due. A thousand locks watched at once (one tenant's fleet of blocking queries) were renewed in one
 * pass every `refreshMs`, and every other caller's command met that pass's thousand scripts; spread,
 * a pass carries about a tenth of them.
 */
/** 32: renewals in flight at once; another caller's command waits behind at most these. */
const REFRESH_BATCH = 32;
/** 10: renewal passes per `refreshMs`, each renewing the marks due by then. */
const SLICES = 10;

interface Mark {
  /** What to do when the mark was found run out. */
  readonly onLapse: () => void;
  /** When its next renewal is due (performance clock, ms). */
  dueAt: number;
}

export class WatchMarks {
  /** Lock id -> its mark's listener and renewal time. */
  private readonly marked = new Map<string, Mark>();
  private timer: NodeJS.Timeout | undefined;
  /** A renewal pass is under way (a slow one is not overlapped by the next). */
  private refreshing = false;

  constructor(
    /** Runs watch-mark.lua on a lock id; resolves to whether it was still marked. */
    private readonly mark: (id: string) => Promise<boolean>,
    private readonly refreshMs: number,
    /** A number in [0, 1): where in the first period a new mark's renewal falls (a parameter for tests). */
    private readonly random: () => number = Math.random,
  ) {}

  /** Marks `id` (resolves once Redis has the mark) and keeps it marked until `delete(id)`. */
  async add(id: string, onLapse: () => void): Promise<void> {
    await this.mark(id);
    this.marked.set(id, { onLapse, dueAt: performance.now() + this.refreshMs * this.random() });
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.refresh(), Math.max(1, this.refreshMs / SLICES));
      this.timer.unref();
    }
  }

  /**
   * Marks every watched lock again now, whatever their renewal times: after the subscriber's connection
   * came back (Redis restarted, perhaps without its data), the marks may be gone, and until they are set
   * again the scripts announce nothing, so a change made after Redis was back went unannounced until the
   * mark's renewal (up to `refreshMs` later). A mark that cannot be set now is renewed at the next pass.
   */
  async markAll(): Promise<void> {
    const all = [...this.marked];
    for (let i = 0; i < all.length; i += REFRESH_BATCH) {
      await Promise.all(
        all.slice(i, i + REFRESH_BATCH).map(([id, mark]) =>
          this.mark(id).then(
            () => undefined,
            () => {
              // Retried at the next pass, which has the lock read again if the mark had run out.
              if (this.marked.get(id) === mark) mark.dueAt = performance.now();
            },
          ),
        ),
      );
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
    void this.refreshDue().finally(() => (this.refreshing = false));
  }

  /**
   * Renews the marks due, REFRESH_BATCH at a time: even a tenth of a thousand watched locks sent at
   * once would queue every other caller's command behind them, on this connection and in Redis.
   */
  private async refreshDue(): Promise<void> {
    const now = performance.now();
    const due: [string, Mark][] = [];
    for (const entry of this.marked) {
      const mark = entry[1];
      if (mark.dueAt > now) continue;
      due.push(entry);
      // From its own time, not from now: a late pass does not move the mark's turn (marks renewed in
      // one late pass would stay together after it); one late by a whole period starts again from now.
      mark.dueAt += this.refreshMs;
      if (mark.dueAt <= now) mark.dueAt = now + this.refreshMs;
    }
    for (let i = 0; i < due.length; i += REFRESH_BATCH) {
      await Promise.all(
        due.slice(i, i + REFRESH_BATCH).map(([id, mark]) =>
          this.mark(id).then(
            (wasMarked) => {
              if (!wasMarked && this.marked.get(id) === mark) mark.onLapse();
            },
            // Redis unreachable: the next renewal finds the mark run out and has the lock read again.
            () => undefined,
          ),
        ),
      );
    }
  }
}
