/**
 * The embedded store's change notices (the ChangeFeed of locks, and the permits'): listeners by key,
 * told after the current step, never inside it (a watcher reading the state then sees the step done).
 */
export class ChangeListeners {
  private readonly byKey = new Map<string, Set<() => void>>();

  watch(key: string, onChange: () => void): () => void {
    const listeners = this.byKey.get(key) ?? new Set<() => void>();
    const listener = () => onChange();
    listeners.add(listener);
    this.byKey.set(key, listeners);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.byKey.get(key) === listeners) this.byKey.delete(key);
    };
  }

  changed(key: string): void {
    const listeners = this.byKey.get(key);
    if (listeners === undefined) return;
    for (const listener of listeners) queueMicrotask(listener);
  }
}
