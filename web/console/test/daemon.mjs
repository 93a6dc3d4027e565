// Starts what the browser tests drive: the fake model and daemons built
// from this checkout, each with its own data directory and HOME.
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";

const repo = resolve(import.meta.dirname, "..", "..", "..");

export const prompts = {
  stream: { prompt: "console: stream a turn", text: "Hello from the fake model, streamed into the console piece by piece." },
  approve: { prompt: "console: touch a file", callId: "call_console_touch", file: "approved.txt", text: "Touched it." },
  reload: { prompt: "console: a long turn", text: Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ") },
  restart: { prompt: "console: after the restart", text: "Still here after the restart." },
};

const script = {
  steps: [
    { match: { user_text: prompts.stream.prompt }, text: prompts.stream.text, chunks: 12, event_delay_ms: 20 },
    {
      match: { user_text: prompts.approve.prompt },
      tool_calls: [{ call_id: prompts.approve.callId, name: "shell_command", arguments: { command: `touch ${prompts.approve.file}` } }],
    },
    { match: { call_output: prompts.approve.callId }, text: prompts.approve.text },
    // 60 deltas 60 ms apart: time to reload the page in the middle.
    { match: { user_text: prompts.reload.prompt }, text: prompts.reload.text, chunks: 60, event_delay_ms: 60 },
    { match: { user_text: prompts.restart.prompt }, text: prompts.restart.text, chunks: 3 },
  ],
};

export const token = "console-test-token-0123456789abcdef";

function start(cmd, args, env, pick, cwd) {
  const child = spawn(cmd, args, { env, cwd, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolvePromise, reject) => {
    const lines = createInterface({ input: child.stdout });
    const onExit = (code) => reject(new Error(`${cmd} ${args[0]} exited (${code}) before it was ready`));
    child.once("exit", onExit);
    child.once("error", reject);
    lines.on("line", (line) => {
      const v = pick(line);
      if (v === undefined) return;
      child.off("exit", onExit);
      resolvePromise({ child, value: v });
    });
  });
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

async function freePort() {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

/** Harness: the fake model and a way to start daemons on it. */
export async function harness() {
  const dir = await mkdtemp(join(tmpdir(), "appserver-console-test-"));
  const home = join(dir, "home");
  await mkdir(home);
  const children = new Set();
  let bin = process.env.APPSERVER_BIN;
  if (!bin) {
    bin = join(dir, "appserver");
    await promisify(execFile)("go", ["build", "-o", bin, "./cmd/appserver"], { cwd: repo });
  }
  await writeFile(join(dir, "script.json"), JSON.stringify(script));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("APPSERVER_")));
  env.HOME = home;
  const fake = await start(bin, ["mockmodel", "--script", join(dir, "script.json")], env, (l) => (l.startsWith("http") ? l.trim() : undefined));
  children.add(fake.child);

  /** daemon starts a daemon; guarded asks for the token; port and name make a restart the same daemon. */
  async function daemon({ name, guarded = false, port = 0 }) {
    const args = [
      "serve",
      "--listen",
      `ws://127.0.0.1:${port}`,
      "--log-level",
      "warn",
      "--data-dir",
      join(dir, name),
      "-c",
      'model="fake-model"',
      "-c",
      'model_provider="fake"',
      "-c",
      `model_providers.fake={name="Fake", base_url="${fake.value}", wire_api="responses", request_max_retries=0}`,
    ];
    if (guarded) args.push("--ws-auth", "capability-token", "--ws-token-sha256", createHash("sha256").update(token).digest("hex"));
    // The daemon's own directory is the threads' default working directory.
    const served = await start(bin, args, env, (l) => l.match(/^appserver listening on (ws:\/\/\S+)/)?.[1], await workspace(name));
    children.add(served.child);
    const url = served.value.replace(/^ws/, "http").replace(/\/$/, "");
    return {
      url,
      port: Number(new URL(url).port),
      async stop() {
        await stop(served.child);
        children.delete(served.child);
      },
    };
  }

  async function workspace(name) {
    const ws = join(dir, "ws", name);
    await mkdir(ws, { recursive: true });
    return ws;
  }

  return {
    dir,
    daemon,
    workspace,
    freePort,
    async close() {
      for (const c of [...children].reverse()) await stop(c);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
