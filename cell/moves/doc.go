// Package moves moves a workspace from one cell to another with nothing lost: a persisted,
// resumable state machine (the directory's moves table) whose steps are
//
//	plan → precopy → fence → drain → copy → verify → flip → clean → done
//
// plan checks both cells; precopy copies rows and blobs while the source still takes writes;
// fence stops the source taking writes for the workspace (reads go on, writes get 503
// WORKSPACE_MOVING, no job starts); drain waits until no job of the workspace runs on the
// source; copy catches the target up from a snapshot that holds every write that got past the
// fence; verify compares per-table row counts and checksums and the blobs on both sides; flip
// makes the target the owner at the next placement epoch; clean deletes the source's copy after
// a grace period. Writes are unavailable from fence to flip only, and since the bulk of the
// copy happens before the fence, that window is the time to copy what changed meanwhile and to
// verify.
//
// The copy is generic over the schema: every table of the cell database with a workspace_id
// column is carried (ReadSchema), except the cell's own tenancy rows (CellOwned). Each step can
// run again after a crash of cellctl or of either cell; Engine.Abort rolls a move back before
// its flip with the source authoritative throughout.
//
// The engine runs in cellctl and reaches both cells' databases and blob stores directly; it
// never goes through a cell's HTTP API. Why, and what it needs, is in CELLS.md.
package moves
