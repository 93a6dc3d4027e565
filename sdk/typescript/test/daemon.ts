// Vitest global setup: a real daemon on the fake model, shared by the test
// files. The binary is $APPSERVER_BIN (make test builds it) or built here
// with go build; the daemon gets a data directory and a HOME of its own
// (commands run in the user's login shell, which must not read the
// developer's profile).

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import type { TestProject } from "vitest/node";
import { script } from "./script.js";

/** Where the tests find the daemon. */
export interface Daemon {
  /** ws://127.0.0.1:PORT */
  wsUrl: string;
  /** http://127.0.0.1:PORT */
  httpUrl: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    /** A daemon without authentication. */
    daemon: Daemon;
    /** A daemon that requires a capability token. */
    guarded: Daemon & { token: string };
  }
}

const repo = resolve(import.meta.dirname, "..", "..", "..");

async function binary(dir: string): Promise<string> {
  if (process.env.APPSERVER_BIN) return process.env.APPSERVER_BIN;
  const out = join(dir, "appserver");
  await promisify(execFile)("go", ["build", "-o", out, "./cmd/appserver"], { cwd: repo });
  return out;
}

// start runs a command and resolves with it and the first line of its
// stdout that pick accepts.
function start(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  logs: "inherit" | "ignore",
  pick: (line: string) => string | undefined,
): Promise<{ child: ChildProcess; value: string }> {
  const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", logs] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const onExit = (code: number | null) => reject(new Error(`${cmd} ${args[0]} exited (${code}) before it was ready`));
    child.once("exit", onExit);
    child.once("error", reject);
    lines.on("line", (line) => {
      const v = pick(line);
      if (v === undefined) return;
      child.off("exit", onExit);
      lines.removeAllListeners("line");
      child.stdout!.resume(); // keep draining
      resolve({ child, value: v });
    });
  });
}

function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

/** The capability token of the daemon that requires one (Daemon.token). */
const token = "sdk-test-token";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), "appserver-sdk-test-"));
  const home = join(dir, "home");
  const children: ChildProcess[] = [];
  const teardown = async () => {
    for (const c of children.reverse()) await stop(c);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const bin = await binary(dir);
    await writeFile(join(dir, "script.json"), JSON.stringify(script));
    await mkdir(home);
    // The daemon reads APPSERVER_* as configuration.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("APPSERVER_")));
    env.HOME = home;
    const fake = await start(bin, ["mockmodel", "--script", join(dir, "script.json")], env, "ignore", (l) =>
      l.startsWith("http") ? l.trim() : undefined,
    );
    children.push(fake.child);
    const serve = async (name: string, ...extra: string[]): Promise<string> => {
      const served = await start(
        bin,
        [
          "serve",
          "--listen",
          "ws://127.0.0.1:0",
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
          "-c",
          "features.multi_agent=true",
          ...extra,
        ],
        env,
        "inherit",
        (l) => l.match(/^appserver listening on (ws:\/\/\S+)/)?.[1],
      );
      children.push(served.child);
      return served.value;
    };
    const [open, guarded] = await Promise.all([
      serve("open"),
      serve("guarded", "--ws-auth", "capability-token", "--ws-token-sha256", createHash("sha256").update(token).digest("hex")),
    ]);
    project.provide("daemon", { wsUrl: open, httpUrl: open.replace(/^ws/, "http") });
    project.provide("guarded", { wsUrl: guarded, httpUrl: guarded.replace(/^ws/, "http"), token });
  } catch (err) {
    await teardown();
    throw err;
  }
  return teardown;
}
