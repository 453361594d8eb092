// The shapes of the fake upstream's echoes (upstream.mjs, GET /echo): shared
// with the reflection test, which computes from them what the sandbox must see.

/** The body of an echo: what comes before the value, the value written as enc,
 * and what follows. */
export function echoParts(value, enc) {
  const b64 = (s) => Buffer.from(s, 'latin1').toString('base64');
  const jsonEsc = (s) => JSON.stringify(s).slice(1, -1).replace(/\//g, '\\/')
    .replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  switch (enc) {
    case 'verbatim': return ['you sent [', value, ']'];
    case 'base64': return ['you sent [', b64(value), ']'];
    case 'base64url': return ['you sent [', Buffer.from(value, 'latin1').toString('base64url'), ']'];
    case 'basic1': return ['you sent [Basic ', b64(`user:${value}`), ']']; // the value at offset 5 (mod 3: 2)
    case 'basic2': return ['you sent [Basic ', b64(`usr:${value}`), ']']; // at offset 4 (mod 3: 1)
    case 'percent': return ['you sent [https://cb.test/?token=', encodeURIComponent(value), '&state=1]'];
    case 'json': return ['{"you sent":"', jsonEsc(value), '"}'];
    case 'json-base64': return ['{"you sent":"', b64(value).replace(/\//g, '\\/'), '"}'];
    default: throw new Error(`no encoding ${enc}`);
  }
}
