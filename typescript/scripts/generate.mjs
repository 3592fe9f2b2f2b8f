// `npm run generate` (run before every build): src/stores/postgres/generated.ts from the Python
// package of this repository (scripts/generate_sql.py), with the repository's Python
// (ACTRONE_TEST_PYTHON, else ../.venv/bin/python). Kept as is when its inputs have not changed.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(root, "..");
const python = process.env.ACTRONE_TEST_PYTHON || resolve(repo, ".venv", "bin", "python");
const out = join(root, "src", "stores", "postgres", "generated.ts");
if (!existsSync(python)) {
  if (existsSync(out)) {
    console.warn(`no Python at ${python}: src/stores/postgres/generated.ts kept as it is (set ACTRONE_TEST_PYTHON to regenerate it)`);
    process.exit(0);
  }
  console.error(`no Python at ${python}: set ACTRONE_TEST_PYTHON to the interpreter that has actrone_pg installed`);
  process.exit(2);
}
const env = { ...process.env, PYTHONPATH: [repo, process.env.PYTHONPATH].filter(Boolean).join(delimiter) };
const run = spawnSync(python, [join(root, "scripts", "generate_sql.py"), out], { stdio: "inherit", env, cwd: root });
process.exit(run.status ?? 1);
