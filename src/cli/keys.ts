/**
 * `toolchain keys create --workspace <id> [--skills a,b|pack.*] [--label text] [--permit relax_confirmation] [--user <id> [--name text] [--roles approver,viewer]]`
 * `toolchain keys list [--workspace <id>]`
 * `toolchain keys revoke <keyId>`
 * A key is printed once, when created; only its sha256 is stored. With an embedded database, stop
 * the server first (one process owns an embedded database).
 */
import {
  assertKeyUser,
  KEY_PERMISSIONS,
  type AccessStore,
  type KeyPermission,
  type KeyUser,
} from "../store/access-store.js";

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

export interface KeysHooks {
  /** Called for the workspace of a new key (e.g. to create its demo table); its result is printed. */
  onWorkspace?(workspaceId: string): Promise<Record<string, unknown> | undefined>;
}

export async function keysCommand(
  access: AccessStore,
  args: string[],
  out: (s: string) => void = console.log,
  hooks: KeysHooks = {},
): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case "create": {
      const workspace = flag(rest, "--workspace");
      if (!workspace) {
        console.error(
          "usage: toolchain keys create --workspace <id> [--skills a,b] [--label text] [--user <id> [--name text] [--roles approver,viewer]]",
        );
        return 2;
      }
      const skills = flag(rest, "--skills");
      const ws = await access.ensureWorkspace(
        workspace,
        skills !== undefined
          ? {
              allowedSkills:
                skills === "*"
                  ? null
                  : skills
                      .split(",")
                      .map((s) => s.trim())
                      .filter(Boolean),
            }
          : {},
      );
      const extra = (await hooks.onWorkspace?.(ws.workspaceId)) ?? {};
      const permit = flag(rest, "--permit");
      const permissions = permit
        ? permit
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean)
        : [];
      const bad = permissions.find((p) => !KEY_PERMISSIONS.includes(p as KeyPermission));
      if (bad) {
        console.error(`--permit: unknown permission "${bad}" (known: ${KEY_PERMISSIONS.join(", ")})`);
        return 2;
      }
      let user: KeyUser | undefined;
      const userId = flag(rest, "--user");
      if (userId !== undefined) {
        const name = flag(rest, "--name");
        const roles = flag(rest, "--roles");
        user = {
          id: userId,
          ...(name !== undefined ? { name } : {}),
          ...(roles !== undefined
            ? {
                roles: roles
                  .split(",")
                  .map((s) => s.trim())
                  .filter(Boolean) as KeyUser["roles"],
              }
            : {}),
        };
        try {
          assertKeyUser(user, "--user");
        } catch (e) {
          console.error((e as Error).message.replace("--user.name", "--name").replace("--user.roles", "--roles"));
          return 2;
        }
      } else if (rest.includes("--roles") || rest.includes("--name")) {
        console.error("--roles and --name describe a personal key's user: add --user <id>");
        return 2;
      }
      const { key, info } = await access.createKey(workspace, {
        label: flag(rest, "--label"),
        permissions: permissions as KeyPermission[],
        ...(user ? { user } : {}),
      });
      out(
        JSON.stringify(
          {
            key,
            keyId: info.keyId,
            workspaceId: ws.workspaceId,
            allowedSkills: ws.allowedSkills,
            permissions,
            ...(user ? { user } : {}),
            ...extra,
          },
          null,
          2,
        ),
      );
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
      console.error(
        "usage: toolchain keys create --workspace <id> [--skills a,b] | keys list [--workspace <id>] | keys revoke <keyId>",
      );
      return 2;
  }
}
