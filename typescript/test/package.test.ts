// The package as a user receives it: `npm pack`, installed into an empty project, runs the
// README's quickstart (type-checked against the packed declarations) and prints what the README
// says it prints.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import ts from "typescript";

const root = process.cwd();

function quickstart(): { code: string; expected: string[] } {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Quickstart"));
  const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
  const expected = [...code.matchAll(/^\/\/ (.*)$/gm)].map((m) => m[1]!);
  return { code, expected };
}

test("npm pack installs into an empty project and runs the README's quickstart", { timeout: 240_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "actrone-pack-"));
  try {
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const quiet = { cwd: dir, stdio: "pipe" as const, env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" } };
    const tarball = execFileSync(npm, ["pack", "--silent", "--pack-destination", dir, root], quiet).toString().trim().split("\n").pop()!;
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "quickstart", private: true, type: "module" }));
    execFileSync(npm, ["install", "--prefer-offline", "--no-audit", "--no-fund", join(dir, tarball)], quiet);
    const { code, expected } = quickstart();
    assert.ok(expected.length > 0, "the quickstart says what it prints");
    writeFileSync(join(dir, "quickstart.ts"), code);
    // Type-check against the installed package's declarations, as a user's editor would.
    const program = ts.createProgram([join(dir, "quickstart.ts")], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ["lib.es2022.d.ts", "lib.esnext.disposable.d.ts"],
      types: ["node"],
      typeRoots: [join(root, "node_modules", "@types")],
      skipLibCheck: false,
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    assert.deepEqual(diagnostics, []);
    const js = ts.transpileModule(code, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
    writeFileSync(join(dir, "quickstart.mjs"), js);
    const out = execFileSync(process.execPath, ["quickstart.mjs"], { cwd: dir, stdio: "pipe" }).toString().trim().split("\n");
    assert.deepEqual(out, expected);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
