import { runSealClearLeadsCommand } from '../src/cli/seal-clear-leads.js';

// `leadpost seal-clear-leads --json` in a process of its own (bench/seal-clear-leads.ts), printing
// after its own line what the run cost this process: its time, CPU and the most memory it held.

const started = performance.now();
const code = await runSealClearLeadsCommand(['--json']);
const usage = process.resourceUsage();
console.log(JSON.stringify({ code, ms: Math.round(performance.now() - started), userMs: Math.round(usage.userCPUTime / 1000), systemMs: Math.round(usage.systemCPUTime / 1000), maxRssMb: Math.round(usage.maxRSS / 1024) }));
