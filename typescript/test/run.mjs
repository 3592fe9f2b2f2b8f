// `npm test`: Python writes the parity fixtures (test/fixtures/generate.py, run by the Python of
// the repository's venv: ACTRONE_TEST_PYTHON, else ../.venv/bin/python), then Node's test runner runs
// every compiled test file. The fixtures are never committed: they are Python's answers of today.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..");
const repo = resolve(root, "..");
const python = process.env.ACTRONE_TEST_PYTHON || resolve(repo, ".venv", "bin", "python");
const out = join(root, "build-test", "fixtures");
mkdirSync(out, { recursive: true });

if (!existsSync(python)) {
  console.error(`no Python at ${python}: set ACTRONE_TEST_PYTHON to the interpreter that has actrone_pg installed`);
  process.exit(2);
}
const env = { ...process.env, PYTHONPATH: [repo, process.env.PYTHONPATH].filter(Boolean).join(delimiter) };
const generated = spawnSync(python, [join(here, "fixtures", "generate.py"), out], { stdio: "inherit", env, cwd: root });
if (generated.status !== 0) {
  console.error("the fixture generator failed");
  process.exit(generated.status ?? 1);
}

const testDir = join(root, "build-test", "test");
const files = readdirSync(testDir)
  .filter((f) => f.endsWith(".test.js"))
  .sort()
  .map((f) => join(testDir, f));
const run = spawnSync(process.execPath, ["--test", "--test-reporter=spec", ...files], {
  stdio: "inherit",
  env: { ...process.env, ACTRONE_TEST_FIXTURES: out },
  cwd: root,
});
process.exit(run.status ?? 1);
