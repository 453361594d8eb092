/* The live list of sandboxes and their events. Server-Sent Events from /v1/events/stream when
 * the daemon has it (EventSource sends the cookie alone, no header); otherwise, or while the
 * stream is down, GET /v1/sandboxes every 2 s. Pages subscribe; nothing reloads. */
import { api } from './api';
import type { Sandbox } from './types';

export type Mode = 'connecting' | 'stream' | 'polling' | 'stopped';

const POLL_MS = 2000;
const MAX_PAGES = 50;

function isSandbox(v: unknown): v is Sandbox {
  return typeof v === 'object' && v !== null && typeof (v as Sandbox).id === 'string';
}

/* An event as the stream tells it: a notice without its seq (the daemon numbers events
 * when it stores them); the page reads the event itself with GET .../events?after=. */
export interface LiveEvent {
  sandboxId: string;
  kind: string;
  time?: string;
}

class Live {
  sandboxes = new Map<string, Sandbox>();
  loaded = false;
  error: string | null = null;
  mode: Mode = 'stopped';
  private listeners = new Set<() => void>();
  private eventListeners = new Set<(e: LiveEvent) => void>();
  private es: EventSource | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private polling = false;
  private generation = 0;
  /* the admin's list is every account's (GET /v1/sandboxes?account=*); an account's, its own */
  private everyone = false;

  subscribe(f: () => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }
  onEvent(f: (e: LiveEvent) => void): () => void {
    this.eventListeners.add(f);
    return () => this.eventListeners.delete(f);
  }
  private emit(): void {
    for (const f of [...this.listeners]) f();
  }

  start(admin: boolean): void {
    if (this.mode !== 'stopped') return;
    this.everyone = admin;
    this.generation++;
    this.mode = 'connecting';
    this.refresh();
    this.openStream();
  }

  stop(): void {
    this.generation++;
    this.mode = 'stopped';
    this.es?.close();
    this.es = null;
    this.stopPolling();
    this.sandboxes.clear();
    this.loaded = false;
  }

  /** The whole list again, every page (after a change the page made, or to resync). */
  async refresh(): Promise<void> {
    const gen = this.generation;
    try {
      const all: Sandbox[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < MAX_PAGES; i++) {
        const q: string = '/v1/sandboxes?limit=100' + (this.everyone ? '&account=*' : '') + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
        const page: { data?: unknown; nextCursor?: unknown } = await api('GET', q);
        if (gen !== this.generation) return;
        if (Array.isArray(page?.data)) all.push(...page.data.filter(isSandbox));
        cursor = typeof page?.nextCursor === 'string' && page.nextCursor ? page.nextCursor : null;
        if (!cursor) break;
      }
      this.sandboxes = new Map(all.map((s) => [s.id, s]));
      this.loaded = true;
      this.error = null;
    } catch (e) {
      if (gen !== this.generation) return;
      this.error = (e as Error).message;
    }
    this.emit();
  }

  /** A sandbox the page just got from an answer (an action's), shown at once. */
  upsert(s: unknown): void {
    if (!isSandbox(s)) return;
    this.sandboxes.set(s.id, s);
    this.emit();
  }
  remove(id: string): void {
    this.sandboxes.delete(id);
    this.emit();
  }

  private openStream(): void {
    if (typeof EventSource === 'undefined') return this.startPolling();
    const gen = this.generation;
    let opened = false;
    let es: EventSource;
    try {
      es = new EventSource('/v1/events/stream', { withCredentials: true });
    } catch {
      return this.startPolling();
    }
    this.es = es;
    es.onopen = () => {
      if (gen !== this.generation) return;
      const wasDown = opened || this.polling;
      opened = true;
      this.mode = 'stream';
      this.stopPolling();
      if (wasDown) this.refresh(); /* what changed while it was down */
      this.emit();
    };
    es.onerror = () => {
      if (gen !== this.generation) return;
      if (es.readyState === EventSource.CLOSED) {
        /* refused (404: an older daemon; 401: the session ended, which polling will tell) */
        this.es = null;
        this.startPolling();
      } else if (!this.polling) {
        /* reconnecting: poll meanwhile */
        this.startPolling();
      }
    };
    es.addEventListener('sandbox', (m) => {
      const s = parse((m as MessageEvent).data);
      if (isSandbox(s)) this.upsert(s);
    });
    es.addEventListener('sandbox.deleted', (m) => {
      const d = parse((m as MessageEvent).data) as { id?: unknown } | null;
      if (d && typeof d.id === 'string') this.remove(d.id);
    });
    es.addEventListener('event', (m) => {
      const d = parse((m as MessageEvent).data) as LiveEvent | null;
      if (!d || typeof d !== 'object' || typeof d.sandboxId !== 'string' || typeof d.kind !== 'string') return;
      for (const l of [...this.eventListeners]) l(d);
    });
  }

  private startPolling(): void {
    if (this.polling || this.mode === 'stopped') return;
    this.polling = true;
    this.mode = 'polling';
    this.emit();
    const gen = this.generation;
    const tick = async () => {
      if (gen !== this.generation || !this.polling) return;
      if (typeof document === 'undefined' || !document.hidden) await this.refresh();
      if (gen !== this.generation || !this.polling) return;
      this.timer = setTimeout(tick, POLL_MS);
    };
    this.timer = setTimeout(tick, POLL_MS);
  }

  private stopPolling(): void {
    this.polling = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

function parse(s: unknown): unknown {
  if (typeof s !== 'string' || s.length > 4 << 20) return null;
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}

export const live = new Live();
