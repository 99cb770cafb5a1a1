#!/usr/bin/env node
// The `berth` command: compiled by `npm ci` (the prepare script) into dist/.
import '../dist/cli/main.js';
