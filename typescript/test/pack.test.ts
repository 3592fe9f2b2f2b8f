// The published package as a user gets it: `npm pack`, installed into an empty project, runs the
// README's quickstart as written (compiled by TypeScript, as a user's project would be, and as a
// plain .mjs file) and prints the memory it promises (the README's `// ` lines after the code).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { helpersDir } from "./helpers/pg.js";

const root = resolve(helpersDir, "..", "..");

/** The README's quickstart: its code, and the output its last comment lines promise. */
function quickstart(): { code: string; expected: string[] } {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Quickstart"));
  const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
  const lines = code.trimEnd().split("\n");
  const expected: string[] = [];
  while (lines.length > 0 && lines.at(-1)!.startsWith("// ")) expected.unshift(lines.pop()!.slice(3));
  return { code, expected };
}

test("the repository README's TypeScript example is the package's quickstart (tested below)", () => {
  const readme = readFileSync(join(root, "..", "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## TypeScript"));
  const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
  assert.equal(code, quickstart().code);
});

test("npm pack, installed into an empty project, runs the README's quickstart", { timeout: 600_000 }, () => {
  const { code, expected } = quickstart();
  assert.ok(expected.length > 0, "the quickstart says what it prints");
  const work = mkdtempSync(join(tmpdir(), "actrone-pg-pack-"));
  try {
    const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip", npm_config_audit: "false", npm_config_fund: "false" };
    const packed = execFileSync("npm", ["pack", "--silent", "--pack-destination", work], { cwd: root, env, encoding: "utf8" });
    const tarball = join(work, packed.trim().split("\n").at(-1)!);
    const project = join(work, "app");
    execFileSync("mkdir", ["-p", project]);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], { cwd: project, env, stdio: "pipe" });
    writeFileSync(join(project, "quickstart.ts"), code);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { target: "ES2022", lib: ["ES2022", "ESNext.Disposable", "DOM"], module: "NodeNext", moduleResolution: "NodeNext", strict: true, skipLibCheck: false, types: [] },
        files: ["quickstart.ts"],
      }),
    );
    // The repository's TypeScript compiles it against the installed package's declarations.
    execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", project], { cwd: project, stdio: "pipe" });
    const out = execFileSync(process.execPath, ["quickstart.js"], { cwd: project, env, encoding: "utf8" });
    assert.deepEqual(out.trimEnd().split("\n").slice(-expected.length), expected);
    // The same code as plain JavaScript, uncompiled, on the Node this runs on (a user of Node 20
    // pasting it into quickstart.mjs): no TypeScript-only syntax, no `await using`.
    writeFileSync(join(project, "quickstart.mjs"), code);
    const plain = execFileSync(process.execPath, ["quickstart.mjs"], { cwd: project, env, encoding: "utf8" });
    assert.deepEqual(plain.trimEnd().split("\n").slice(-expected.length), expected);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
