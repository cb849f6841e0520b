/**
 * `toolchain keys create --workspace <id> [--skills a,b|pack.*] [--label text] [--permit relax_confirmation]`
 * `toolchain keys list [--workspace <id>]`
 * `toolchain keys revoke <keyId>`
 * A key is printed once, when created; only its sha256 is stored. With an embedded database, stop
 * the server first (one process owns an embedded database).
 */
import { KEY_PERMISSIONS, type AccessStore, type KeyPermission } from "../store/access-store.js";

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

export interface KeysHooks {
  /** Called for the workspace of a new key (e.g. to create its demo table); its result is printed. */
  onWorkspace?(workspaceId: string): Promise<Record<string, unknown> | undefined>;
}

export async function keysCommand(access: AccessStore, args: string[], out: (s: string) => void = console.log, hooks: KeysHooks = {}): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case "create": {
      const workspace = flag(rest, "--workspace");
      if (!workspace) {
        console.error("usage: toolchain keys create --workspace <id> [--skills a,b] [--label text]");
        return 2;
      }
      const skills = flag(rest, "--skills");
      const ws = await access.ensureWorkspace(workspace, skills !== undefined ? { allowedSkills: skills === "*" ? null : skills.split(",").map((s) => s.trim()).filter(Boolean) } : {});
      const extra = (await hooks.onWorkspace?.(ws.workspaceId)) ?? {};
      const permit = flag(rest, "--permit");
      const permissions = permit ? permit.split(",").map((s) => s.trim()).filter(Boolean) : [];
      const bad = permissions.find((p) => !KEY_PERMISSIONS.includes(p as KeyPermission));
      if (bad) {
        console.error(`--permit: unknown permission "${bad}" (known: ${KEY_PERMISSIONS.join(", ")})`);
        return 2;
      }
      const { key, info } = await access.createKey(workspace, { label: flag(rest, "--label"), permissions: permissions as KeyPermission[] });
      out(JSON.stringify({ key, keyId: info.keyId, workspaceId: ws.workspaceId, allowedSkills: ws.allowedSkills, permissions, ...extra }, null, 2));
      console.error("store this key now: it is not shown again");
      return 0;
    }
    case "list":
      out(JSON.stringify(await access.listKeys(flag(rest, "--workspace")), null, 2));
      return 0;
    case "revoke": {
      const ok = await access.revokeKey(rest[0] ?? "");
      out(JSON.stringify({ revoked: ok }));
      return ok ? 0 : 1;
    }
    default:
      console.error("usage: toolchain keys create --workspace <id> [--skills a,b] | keys list [--workspace <id>] | keys revoke <keyId>");
      return 2;
  }
}
