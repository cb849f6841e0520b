/**
 * The workspace of runs started without one (the library, the embedded server's single user).
 * Skills scope their data by the run's workspace, so every surface must name the same one.
 * (The runs table's column default in src/store/migrations.ts is the same text, fixed in SQL.)
 */
export const DEFAULT_WORKSPACE = "default";
