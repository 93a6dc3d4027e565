// Builds the console into internal/console/assets, which the daemon embeds:
// src/main.ts bundled with the client library (sdk/typescript/src) by
// esbuild, and the page and its style sheet as they are. With --check it
// writes nothing and fails when the committed assets are not what the
// sources build (CI runs that).
import { build } from "esbuild";
import { readFile } from "node:fs/promises";
import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "..", "internal", "console", "assets");
const check = process.argv.includes("--check");

const bundle = await build({
  entryPoints: [join(here, "src", "main.ts")],
  bundle: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  write: false,
  logLevel: "warning",
  // The library loads the ws package only in Node, by a name it computes.
  logOverride: { "unsupported-dynamic-import": "silent" },
});

const files = {
  "app.js": bundle.outputFiles[0].text,
  "index.html": await readFile(join(here, "src", "index.html"), "utf8"),
  "app.css": await readFile(join(here, "src", "app.css"), "utf8"),
};

let stale = [];
for (const [name, text] of Object.entries(files)) {
  const path = join(out, name);
  if (check) {
    const committed = await readFile(path, "utf8").catch(() => "");
    if (committed !== text) stale.push(name);
  } else {
    await writeFile(path, text);
  }
}
if (stale.length > 0) {
  console.error(`internal/console/assets is not what web/console builds (${stale.join(", ")}): run npm run build in web/console and commit`);
  process.exit(1);
}
