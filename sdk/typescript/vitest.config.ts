import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/daemon.ts"],
    // The daemon runs real turns on a shared machine: generous, not tight.
    testTimeout: 60_000,
  },
});
