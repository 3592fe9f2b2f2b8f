/**
 * The per-user directories Python's `platformdirs` gives `actrone-pg`, so that both languages
 * find the same models and data: `userCacheDir()` and `userDataDir()` on Linux (XDG), macOS and
 * Windows, as `platformdirs.user_cache_dir("actrone-pg")` and `user_data_dir("actrone-pg")`.
 */
import { homedir } from "node:os";
import { join } from "node:path";

const APP = "actrone-pg";

function xdg(variable: string, fallback: string[]): string {
  const value = (process.env[variable] ?? "").trim();
  return value !== "" ? value : join(homedir(), ...fallback);
}

function windowsLocal(): string {
  const value = (process.env.LOCALAPPDATA ?? "").trim();
  return value !== "" ? value : join(homedir(), "AppData", "Local");
}

/** `platformdirs.user_cache_dir("actrone-pg")`. */
export function userCacheDir(): string {
  switch (process.platform) {
    case "darwin":
      return join(homedir(), "Library", "Caches", APP);
    case "win32":
      return join(windowsLocal(), APP, APP, "Cache");
    default:
      return join(xdg("XDG_CACHE_HOME", [".cache"]), APP);
  }
}

/** `platformdirs.user_data_dir("actrone-pg")`. */
export function userDataDir(): string {
  switch (process.platform) {
    case "darwin":
      return join(homedir(), "Library", "Application Support", APP);
    case "win32":
      return join(windowsLocal(), APP, APP);
    default:
      return join(xdg("XDG_DATA_HOME", [".local", "share"]), APP);
  }
}

/** Where model directories are looked for by name: `<user cache>/actrone-pg/models`. */
export function modelsDir(): string {
  return join(userCacheDir(), "models");
}

/** Where the embedded PostgreSQL keeps its data (Python's `default_data_dir()`). */
export function defaultDataDir(): string {
  return join(userDataDir(), "pgdata");
}
