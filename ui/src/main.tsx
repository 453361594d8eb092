/* The dashboard: the session, the router, the frame of every page. */
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getSession, messageOf, setCsrfToken, setUnauthorizedHandler, signIn, signOut } from './api';
import { live } from './live';
import { href, parseRoute, type Route } from './lib/route';
import type { Session } from './types';
import { Txt } from './ui';
import { SandboxesPage } from './pages/sandboxes';
import { SandboxPage } from './pages/sandbox';
import { McpPage } from './pages/mcp';
import { ReviewPage } from './pages/review';
import { CatalogPage } from './pages/catalog';
import { UsagePage } from './pages/usage';
import { SecretsPage } from './pages/secrets';
import { AccountsPage } from './pages/accounts';
import { ConnectPage, ConnectionsPage } from './pages/connect';

function currentRoute(): Route {
  return parseRoute(location.pathname, location.search, location.hash);
}

function Login({ notice, onSession }: { notice: string; onSession: (s: Session) => void }) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const submit = async (e: Event) => {
    e.preventDefault();
    const el = input.current;
    if (!el) return;
    const key = el.value;
    if (!key.trim()) {
      setError('Enter an API key.');
      return;
    }
    setBusy(true);
    setError('');
    try {
      const s = await signIn(key.trim());
      el.value = '';
      onSession(s);
    } catch (err) {
      el.value = '';
      setError(err instanceof ApiError && err.status === 401 ? messageOf(err) || 'That API key is not valid.' : messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <h1>runtime</h1>
      {notice && <p class="notice" data-testid="login-notice">{notice}</p>}
      <form onSubmit={submit} data-testid="login-form" method="post" action="/dashboard/session" autocomplete="off">
        <label for="apikey">API key</label>
        <input id="apikey" ref={input} type="password" name="apiKey" autocomplete="off" spellcheck={false} data-testid="login-input" required />
        <button type="submit" class="primary" disabled={busy} data-testid="login-button">Sign in</button>
        {error && <p class="error" role="alert" data-testid="login-error"><Txt v={error} /></p>}
      </form>
      <p class="hint">The admin key is in <code>STATE/admin.key</code> on the host; an account's key was shown once when it was made. It is sent once, to sign in; the page keeps no copy.</p>
    </main>
  );
}

function Nav({ session, route, onLogout }: { session: Session; route: Route; onLogout: () => void }) {
  const [mode, setMode] = useState(live.mode);
  useEffect(() => live.subscribe(() => setMode(live.mode)), []);
  const cur = (pages: string[]) => (pages.includes(route.page) ? 'page' : undefined);
  return (
    <header class="top">
      <a class="brand" href={href.sandboxes()}>runtime</a>
      <nav aria-label="main">
        <a href={href.sandboxes()} aria-current={cur(['sandboxes', 'sandbox', 'mcp', 'review'])} data-testid="nav-sandboxes">Sandboxes</a>
        <a href={href.catalog()} aria-current={cur(['catalog', 'catalogReview'])} data-testid="nav-catalog">Catalog</a>
        <a href={href.usage()} aria-current={cur(['usage'])} data-testid="nav-usage">Usage</a>
        <a href={href.secrets()} aria-current={cur(['secrets'])} data-testid="nav-secrets">Secrets</a>
        <a href={href.connections()} aria-current={cur(['connections', 'connect'])} data-testid="nav-connections">Connections</a>
        {session.admin && <a href={href.accounts()} aria-current={cur(['accounts'])} data-testid="nav-accounts">Accounts</a>}
      </nav>
      <span class="spacer" />
      <span class={'live live-' + mode} data-testid="live-mode" title={mode === 'stream' ? 'live: events stream' : mode === 'polling' ? 'live: polling every 2 s' : mode}>
        {mode === 'stream' ? 'live' : mode === 'polling' ? 'polling' : mode}
      </span>
      <span class="who" data-testid="account">
        <Txt v={session.account} max={80} />
        {session.admin && <span class="badge">admin</span>}
      </span>
      <button type="button" class="small" onClick={onLogout} data-testid="logout">Sign out</button>
    </header>
  );
}

function Page({ route, session }: { route: Route; session: Session }) {
  switch (route.page) {
    case 'connect':
      return <ConnectPage code={route.code} session={session} />;
    case 'sandboxes':
      return <SandboxesPage admin={session.admin} />;
    case 'sandbox':
      return <SandboxPage id={route.id} />;
    case 'mcp':
      return <McpPage id={route.id} name={route.name} />;
    case 'review':
      return <ReviewPage kind="sandbox" id={route.id} name={route.name} />;
    case 'catalog':
      return <CatalogPage />;
    case 'catalogReview':
      return <ReviewPage kind="catalog" id={route.entry} name={route.entry} />;
    case 'usage':
      return <UsagePage session={session} />;
    case 'secrets':
      return <SecretsPage />;
    case 'accounts':
      return <AccountsPage session={session} />;
    case 'connections':
      return <ConnectionsPage />;
    default:
      return (
        <main>
          <h1>Not found</h1>
          <p>No page at this address. <a href={href.sandboxes()}>Sandboxes</a></p>
        </main>
      );
  }
}

function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [notice, setNotice] = useState('');
  const [fatal, setFatal] = useState('');
  const [route, setRoute] = useState(currentRoute());

  useEffect(() => {
    const f = () => setRoute(currentRoute());
    window.addEventListener('hashchange', f);
    window.addEventListener('popstate', f);
    setUnauthorizedHandler((msg) => {
      live.stop();
      setCsrfToken('');
      setNotice(msg);
      setSession(null);
    });
    getSession().then(
      (s) => start(s),
      (e) => setFatal('Cannot read the session: ' + messageOf(e)),
    );
    return () => {
      window.removeEventListener('hashchange', f);
      window.removeEventListener('popstate', f);
    };
  }, []);

  useEffect(() => {
    document.title = 'runtime — ' + (route.page === 'connect' ? 'connect an agent' : route.page);
  }, [route.page]);

  function start(s: Session | null) {
    if (s) {
      setCsrfToken(s.csrfToken);
      setNotice('');
      live.start(s.admin);
    }
    setSession(s);
  }

  const logout = async () => {
    live.stop();
    await signOut();
    setNotice('Signed out.');
    setSession(null);
  };

  if (fatal) return <main class="login"><p class="error" role="alert" data-testid="fatal"><Txt v={fatal} /></p></main>;
  if (session === undefined) return <main class="login"><p>Loading…</p></main>;
  if (session === null)
    return (
      <>
        {route.page === 'connect' && <p class="banner">Sign in to approve the agent's login{route.code ? ' (code ' + route.code + ')' : ''}.</p>}
        <Login notice={notice} onSession={start} />
      </>
    );
  return (
    <>
      <Nav session={session} route={route} onLogout={logout} />
      <Page route={route} session={session} />
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
