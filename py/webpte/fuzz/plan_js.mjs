// The page's plan validator (web/plan.js parsePlan) over plan mutants made by the Python
// fuzzer: one JSON string per stdin line, one verdict per stdout line ("valid", "typed" for
// a PlanError, or "crash: <name>: <message>" for anything else). Usage:
//   node plan_js.mjs <path of web/plan.js> < mutants.jsonl
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const { parsePlan } = await import(pathToFileURL(process.argv[2]).href);
const { PlanError } = await import(new URL('errors.js', pathToFileURL(process.argv[2])).href);

for await (const line of createInterface({ input: process.stdin })) {
  let verdict = 'valid';
  try {
    parsePlan(JSON.parse(line));
  } catch (err) {
    verdict = err instanceof PlanError ? 'typed' : `crash: ${err?.name}: ${String(err?.message).slice(0, 200)}`;
  }
  process.stdout.write(`${verdict}\n`);
}
