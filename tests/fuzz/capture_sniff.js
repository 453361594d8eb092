// Records a client's first flight (the bytes it sends before the server has
// said anything) on loopback, for the sniff seed corpus and unit tests.
//   node capture_sniff.js LISTEN_PORT BACKEND_PORT OUT_FILE
// Listens on 127.0.0.1:LISTEN_PORT and [::1]:LISTEN_PORT, forwards to the real
// server on 127.0.0.1:BACKEND_PORT (openssl s_server, a node TLS or HTTP server),
// writes the first flight of the first connection to OUT_FILE, prints "saved N"
// and exits once that connection closes. Loopback only.
'use strict';
const net = require('net');
const fs = require('fs');

const [listenPort, backendPort, out] = process.argv.slice(2);
let done = false;

function handle(client) {
    const chunks = [];
    let serverSpoke = false;
    const save = () => {
        if (done) return;
        done = true;
        const buf = Buffer.concat(chunks);
        fs.writeFileSync(out, buf);
        console.log(`saved ${buf.length}`);
        process.exit(0);
    };
    const backend = net.connect(Number(backendPort), '127.0.0.1');
    client.on('data', (d) => {
        if (!serverSpoke) chunks.push(d);
        backend.write(d);
    });
    backend.on('data', (d) => {
        serverSpoke = true;
        client.write(d);
    });
    client.on('close', () => { backend.destroy(); save(); });
    backend.on('close', () => client.destroy());
    client.on('error', () => {});
    backend.on('error', () => client.destroy());
    // A server that answers nothing (a bare recorder) still gets a result.
    setTimeout(save, 5000).unref();
}

for (const host of ['127.0.0.1', '::1']) {
    net.createServer(handle).listen(Number(listenPort), host);
}
setTimeout(() => { console.log('no connection'); process.exit(1); }, 20000);
