/* Small pieces every page uses. Everything from the API is rendered as text by Preact (text
 * nodes); nothing here sets innerHTML, and no href is made from an answer but through href.*
 * (encoded hash routes) or safeHttpUrl (http and https only). */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, messageOf } from './api';
import { absoluteTime, relativeTime } from './lib/time';
import { revealHidden, str } from './lib/text';

/** Re-renders every `ms` for relative times. */
export function useNow(ms = 10000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

export function When({ t }: { t: unknown }) {
  const now = useNow();
  const abs = absoluteTime(t);
  return <time dateTime={typeof t === 'string' ? t.slice(0, 64) : undefined} title={abs}>{relativeTime(t, now)}</time>;
}

const STATUS_CLASS: Record<string, string> = {
  running: 'ok', ready: 'ok', serving: 'ok',
  paused: 'idle', hibernated: 'idle', pausing: 'idle', resuming: 'idle',
  creating: 'busy', starting: 'busy', installing: 'busy', stopping: 'busy',
  stopped: 'bad', failed: 'bad', removed: 'bad', exited: 'bad',
  refused: 'warn', pending: 'busy', approved: 'ok', denied: 'bad', expired: 'idle',
};

export function Status({ s, testid }: { s: unknown; testid?: string }) {
  const t = str(s, 40) || 'unknown';
  return <span class={'status status-' + (STATUS_CLASS[t] ?? 'unknown')} data-testid={testid ?? 'status'} data-status={t}>{t}</span>;
}

/** Hostile text, with the characters a person could not see shown as <U+XXXX> markers. */
export function Txt({ v, max }: { v: unknown; max?: number }) {
  const s = str(v, max ?? 20000);
  const pieces = revealHidden(s);
  if (pieces.length === 1 && !pieces[0].hidden) return <>{s}</>;
  return <>{pieces.map((p, i) => (p.hidden ? <mark key={i} class="hidden-char" title="an invisible or reordering character">{p.text}</mark> : p.text))}</>;
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const issues = error instanceof ApiError ? error.issues() : [];
  return (
    <div class="error" role="alert" data-testid="error">
      <Txt v={messageOf(error)} />
      {issues.length > 0 && <ul>{issues.map((i, k) => <li key={k}><Txt v={i} /></li>)}</ul>}
    </div>
  );
}

/** Copies text; where the clipboard API is missing (a plain http page that is not localhost),
 * selects the text to copy by hand. */
export function CopyButton({ text, target, label }: { text: string; target?: { current: HTMLElement | null }; label?: string }) {
  const [done, setDone] = useState('');
  const copy = async () => {
    try {
      if (!navigator.clipboard) throw new Error('no clipboard');
      await navigator.clipboard.writeText(text);
      setDone('Copied');
    } catch {
      const el = target?.current;
      if (el) {
        const range = document.createRange();
        range.selectNodeContents(el);
        const sel = window.getSelection();
        sel?.removeAllRanges();
        sel?.addRange(range);
        let ok = false;
        try {
          ok = document.execCommand('copy');
        } catch {
          ok = false;
        }
        setDone(ok ? 'Copied' : 'Selected: press Ctrl+C');
      } else setDone('Copy failed');
    }
    setTimeout(() => setDone(''), 2500);
  };
  return (
    <button type="button" class="small" data-testid="copy-button" onClick={copy} aria-live="polite">
      {done || label || 'Copy'}
    </button>
  );
}

/** A box of text to copy, with its button. */
export function CopyBox({ text, testid, shown }: { text: string; testid: string; shown?: string }) {
  const ref = useRef<HTMLElement>(null);
  return (
    <div class="copybox">
      <code ref={ref} data-testid={testid}>{shown ?? text}</code>
      <CopyButton text={text} target={shown === undefined ? ref : undefined} />
    </div>
  );
}

/** A button that asks again before it acts: first click shows Confirm / Cancel. */
export function ConfirmButton(props: { label: string; confirm: string; onConfirm: () => void | Promise<void>; testid: string; danger?: boolean; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  if (!asking)
    return (
      <button type="button" class={props.danger ? 'danger' : ''} data-testid={props.testid} disabled={props.disabled || busy} onClick={() => setAsking(true)}>
        {props.label}
      </button>
    );
  return (
    <span class="confirm" role="group">
      <span class="confirm-q">{props.confirm}</span>
      <button
        type="button"
        class={props.danger ? 'danger' : 'primary'}
        data-testid={props.testid + '-confirm'}
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          try {
            await props.onConfirm();
          } finally {
            setBusy(false);
            setAsking(false);
          }
        }}
      >
        Confirm
      </button>
      <button type="button" data-testid={props.testid + '-cancel'} onClick={() => setAsking(false)}>Cancel</button>
    </span>
  );
}

/** A modal box; Escape or its close button closes it. */
export function Dialog({ title, children, onClose, testid }: { title: string; children: ComponentChildren; onClose: () => void; testid: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const prev = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    const key = (e: KeyboardEvent) => e.key === 'Escape' && onClose();
    document.addEventListener('keydown', key);
    return () => {
      document.removeEventListener('keydown', key);
      prev?.focus?.();
    };
  }, []);
  return (
    <div class="overlay">
      <div class="dialog" role="dialog" aria-modal="true" aria-label={title} tabIndex={-1} ref={ref} data-testid={testid}>
        <h2>{title}</h2>
        {children}
      </div>
    </div>
  );
}

/** Loads once (and again when deps change); reload() loads again. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): { data: T | undefined; error: unknown; loading: boolean; reload: () => void; set: (v: T) => void } {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    load(ac.signal).then(
      (data) => !ac.signal.aborted && setState({ data, error: null, loading: false }),
      (error) => !ac.signal.aborted && (error as Error)?.name !== 'AbortError' && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => ac.abort();
  }, [...deps, n]);
  return { ...state, reload: () => setN((x) => x + 1), set: (data: T) => setState({ data, error: null, loading: false }) };
}

export function Labels({ labels }: { labels: unknown }) {
  if (typeof labels !== 'object' || labels === null) return null;
  const e = Object.entries(labels as Record<string, unknown>).slice(0, 32);
  return (
    <span class="labels">
      {e.map(([k, v]) => (
        <span class="label" key={k}>
          <Txt v={k} max={100} />=<Txt v={v} max={200} />
        </span>
      ))}
    </span>
  );
}

/** Lines of a textarea as a list, blank lines dropped. */
export function lines(s: string): string[] {
  return s.split('\n').map((l) => l.trim()).filter((l) => l !== '');
}

export function num(v: unknown, digits = 2): string {
  return typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : '-';
}
