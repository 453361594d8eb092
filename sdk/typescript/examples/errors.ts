import { AuthenticationError, ConflictError, NotFoundError, Runtime, RuntimeError } from 'withruntime';

const runtime = new Runtime({ timeoutMs: 30_000 });
try {
  await runtime.sandboxes.get('no-such-sandbox');
} catch (e) {
  if (e instanceof NotFoundError) console.log(`not found (${e.status} ${e.code})`);
  else throw e;
}

const a = await runtime.sandboxes.create({ name: 'errors-example' });
try {
  await runtime.sandboxes.create({ name: 'errors-example' });
} catch (e) {
  if (e instanceof ConflictError) console.log(`taken (${e.code})`);
  else throw e;
} finally {
  await a.delete();
}

try {
  await new Runtime({ apiKey: 'wrong' }).sandboxes.list();
} catch (e) {
  if (e instanceof AuthenticationError) console.log('unauthorized');
  else if (e instanceof RuntimeError) console.log(`other: ${e.message}`);
}
