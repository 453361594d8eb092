#!/usr/bin/env node
// The `withruntime` command; the code is in src/cli.ts.
import { main } from '../dist/esm/cli.js';

process.exitCode = await main(process.argv.slice(2));
