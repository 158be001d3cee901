package moves

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"slidecells/shared/db"
)

// Rows are carried as text: every column is read as col::TEXT and written back as
// $n::TEXT::type. The text forms of the types castType accepts round-trip exactly (timestamps
// with their zone, which Open fixes to UTC; bytea in hex; arrays and JSON in their canonical
// forms), so a row reads back byte for byte as it was read, which is what verify compares.

// rowSum is the SHA-256 of a row's values; a table's checksum is the SHA-256 of its rows'
// keys and sums in key order.
type rowSum [32]byte

// keyed maps a row's key (its primary-key values, encoded) to its sum.
type keyed map[string]rowSum

// batchRows and batchBytes bound one pipelined batch of writes.
const (
	batchRows  = 500
	batchBytes = 4 << 20
)

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

func selectSQL(t Table) string {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = quote(c.Name) + "::TEXT"
	}
	keys := make([]string, len(t.Key))
	for i, k := range t.Key {
		keys[i] = quote(k)
	}
	// In key order: the primary key's index gives it for free, and it makes a copy's order of
	// writes the same every time.
	return fmt.Sprintf(`SELECT %s FROM %s WHERE workspace_id = $1 ORDER BY %s`, strings.Join(cols, ", "), quote(t.Name), strings.Join(keys, ", "))
}

// keyIndexes are the positions of t's key columns among its columns.
func keyIndexes(t Table) []int {
	out := make([]int, 0, len(t.Key))
	for _, k := range t.Key {
		for i, c := range t.Columns {
			if c.Name == k {
				out = append(out, i)
			}
		}
	}
	return out
}

// encode appends values length-prefixed, NULL as a length of all ones: unambiguous.
func encode(b []byte, vals []*string) []byte {
	for _, v := range vals {
		if v == nil {
			b = binary.BigEndian.AppendUint32(b, ^uint32(0))
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(*v)))
		b = append(b, *v...)
	}
	return b
}

func rowKey(vals []*string, keys []int) string {
	k := make([]*string, len(keys))
	for i, j := range keys {
		k[i] = vals[j]
	}
	return string(encode(nil, k))
}

// scanRows reads every row of the workspace in t through q and calls fn with its key, sum and
// values (valid only during the call).
func scanRows(ctx context.Context, q db.Querier, t Table, ws string, fn func(key string, sum rowSum, vals []*string) error) error {
	rows, err := q.Query(ctx, selectSQL(t), ws)
	if err != nil {
		return fmt.Errorf("read %s: %w", t.Name, err)
	}
	defer rows.Close()
	keys := keyIndexes(t)
	vals := make([]*string, len(t.Columns))
	dest := make([]any, len(t.Columns))
	for i := range vals {
		dest[i] = &vals[i]
	}
	var buf []byte
	for rows.Next() {
		for i := range vals {
			vals[i] = nil
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read %s: %w", t.Name, err)
		}
		buf = encode(buf[:0], vals)
		if err := fn(rowKey(vals, keys), sha256.Sum256(buf), vals); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", t.Name, err)
	}
	return nil
}

func readKeyed(ctx context.Context, q db.Querier, t Table, ws string) (keyed, int64, error) {
	out := keyed{}
	var size int64
	err := scanRows(ctx, q, t, ws, func(key string, sum rowSum, vals []*string) error {
		out[key] = sum
		for _, v := range vals {
			if v != nil {
				size += int64(len(*v))
			}
		}
		return nil
	})
	return out, size, err
}

// TableSum is one table's row count and checksum.
type TableSum struct {
	Rows   int64  `json:"rows"`
	SHA256 string `json:"sha256"`
}

func sumOf(k keyed) TableSum {
	keys := make([]string, 0, len(k))
	for key := range k {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, key := range keys {
		s := k[key]
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(key)))
		h.Write(n[:])
		h.Write([]byte(key))
		h.Write(s[:])
	}
	return TableSum{Rows: int64(len(k)), SHA256: hex.EncodeToString(h.Sum(nil))}
}

// Checksums reads every workspace-owned table of ws through q and returns each one's row count
// and checksum.
func Checksums(ctx context.Context, q db.Querier, s Schema, ws string) (map[string]TableSum, error) {
	out := map[string]TableSum{}
	for _, t := range s.Tables {
		k, _, err := readKeyed(ctx, q, t, ws)
		if err != nil {
			return nil, err
		}
		out[t.Name] = sumOf(k)
	}
	return out, nil
}

// RowStats counts what a copy did.
type RowStats struct {
	Rows     int64 // rows of the workspace at the source
	Bytes    int64 // their size as text
	Inserted int64
	Updated  int64
	Deleted  int64
	// Replaced is set when the incremental copy met a unique or foreign-key conflict on the
	// target and the target's copy was replaced as a whole.
	Replaced bool
}

// syncRows makes the target's rows of ws equal to the source's, as the source transaction src
// reads them: it compares row sums, deletes the target's extra rows (children first), then
// updates changed rows and inserts missing ones (parents first). A copy run twice writes
// nothing the second time, which is what makes the copy before the fence pay off: after the
// fence only what changed meanwhile is written. When the incremental order meets a unique or
// foreign-key conflict (a key moved between rows), the target's copy is deleted and written
// whole. The target must not serve the workspace.
func syncRows(ctx context.Context, src pgx.Tx, dst *db.DB, s Schema, ws string, progress func(done, total int64)) (RowStats, error) {
	var st RowStats
	srcSets := make([]keyed, len(s.Tables))
	dstSets := make([]keyed, len(s.Tables))
	// The target's sums are read meanwhile, on its own connection.
	var g errgroup.Group
	g.Go(func() error {
		for i, t := range s.Tables {
			var err error
			if dstSets[i], _, err = readKeyed(ctx, dst.Pool, t, ws); err != nil {
				return err
			}
		}
		return nil
	})
	for i, t := range s.Tables {
		var err error
		var size int64
		if srcSets[i], size, err = readKeyed(ctx, src, t, ws); err != nil {
			_ = g.Wait()
			return st, err
		}
		st.Rows += int64(len(srcSets[i]))
		st.Bytes += size
	}
	if err := g.Wait(); err != nil {
		return st, err
	}
	err := applyDiff(ctx, src, dst, s, ws, srcSets, dstSets, &st, progress)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "23503") {
		// A unique key or a reference moved between rows: write the whole copy again.
		if err := deleteWorkspace(ctx, dst, s, ws); err != nil {
			return st, err
		}
		for i := range dstSets {
			dstSets[i] = keyed{}
		}
		st = RowStats{Rows: st.Rows, Bytes: st.Bytes, Replaced: true}
		err = applyDiff(ctx, src, dst, s, ws, srcSets, dstSets, &st, progress)
	}
	return st, err
}

func applyDiff(ctx context.Context, src pgx.Tx, dst *db.DB, s Schema, ws string, srcSets, dstSets []keyed, st *RowStats, progress func(done, total int64)) error {
	var total, done int64
	for i := range s.Tables {
		for k, sum := range srcSets[i] {
			if d, ok := dstSets[i][k]; !ok || d != sum {
				total++
			}
		}
		for k := range dstSets[i] {
			if _, ok := srcSets[i][k]; !ok {
				total++
			}
		}
	}
	report := func(n int64) {
		done += n
		if progress != nil {
			progress(done, total)
		}
	}
	report(0)
	// Deletes, children first.
	for i := len(s.Tables) - 1; i >= 0; i-- {
		t := s.Tables[i]
		var gone []string
		for k := range dstSets[i] {
			if _, ok := srcSets[i][k]; !ok {
				gone = append(gone, k)
			}
		}
		if len(gone) == 0 {
			continue
		}
		w := newWriter(dst, report)
		for _, k := range gone {
			w.add(deleteSQL(t), append([]any{}, keyArgs(t, k)...), len(k))
		}
		if err := w.flush(ctx); err != nil {
			return fmt.Errorf("delete from %s: %w", t.Name, err)
		}
		st.Deleted += int64(len(gone))
	}
	// Updates and inserts, parents first, streaming the source's rows. A table's updates go
	// before its inserts, so a unique key handed from an updated row (say, archived) to a new
	// one is free when the new row arrives.
	for i, t := range s.Tables {
		upd, ins := newWriter(dst, report), newWriter(dst, report)
		flush := func() error {
			if err := upd.flush(ctx); err != nil {
				return err
			}
			return ins.flush(ctx)
		}
		err := scanRows(ctx, src, t, ws, func(key string, sum rowSum, vals []*string) error {
			d, ok := dstSets[i][key]
			switch {
			case ok && d == sum:
				return nil
			case ok:
				st.Updated++
				upd.add(updateSQL(t), updateArgs(t, vals), size(vals))
			default:
				st.Inserted++
				ins.add(insertSQL(t), args(vals), size(vals))
			}
			if upd.full() || ins.full() {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", t.Name, err)
		}
	}
	return nil
}

func size(vals []*string) int {
	n := 0
	for _, v := range vals {
		if v != nil {
			n += len(*v)
		}
	}
	return n
}

func args(vals []*string) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		if v != nil {
			out[i] = *v
		}
	}
	return out
}

func insertSQL(t Table) string {
	cols := make([]string, len(t.Columns))
	params := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = quote(c.Name)
		params[i] = fmt.Sprintf("$%d::TEXT::%s", i+1, c.Type)
	}
	return fmt.Sprintf(`INSERT INTO %s (%s) VALUES (%s)`, quote(t.Name), strings.Join(cols, ", "), strings.Join(params, ", "))
}

func isKey(t Table, col string) bool {
	for _, k := range t.Key {
		if k == col {
			return true
		}
	}
	return false
}

// updateSQL sets every non-key column ($1…) where the key matches (the key values follow).
func updateSQL(t Table) string {
	var sets, where []string
	n := 0
	for _, c := range t.Columns {
		if !isKey(t, c.Name) {
			n++
			sets = append(sets, fmt.Sprintf("%s = $%d::TEXT::%s", quote(c.Name), n, c.Type))
		}
	}
	for _, c := range t.Columns {
		if isKey(t, c.Name) {
			n++
			where = append(where, fmt.Sprintf("%s = $%d::TEXT::%s", quote(c.Name), n, c.Type))
		}
	}
	if len(sets) == 0 { // a table of key columns only: rows never differ but by key
		return fmt.Sprintf(`SELECT 1 WHERE %s`, strings.Join(where, " AND "))
	}
	return fmt.Sprintf(`UPDATE %s SET %s WHERE %s`, quote(t.Name), strings.Join(sets, ", "), strings.Join(where, " AND "))
}

func updateArgs(t Table, vals []*string) []any {
	var out []any
	for pass := 0; pass < 2; pass++ {
		for i, c := range t.Columns {
			if isKey(t, c.Name) == (pass == 1) {
				if vals[i] != nil {
					out = append(out, *vals[i])
				} else {
					out = append(out, nil)
				}
			}
		}
	}
	return out
}

// deleteSQL deletes one row by key (the key values in key order).
func deleteSQL(t Table) string {
	where := make([]string, len(t.Key))
	for i, k := range t.Key {
		typ := "text"
		for _, c := range t.Columns {
			if c.Name == k {
				typ = c.Type
			}
		}
		where[i] = fmt.Sprintf("%s = $%d::TEXT::%s", quote(k), i+1, typ)
	}
	return fmt.Sprintf(`DELETE FROM %s WHERE %s`, quote(t.Name), strings.Join(where, " AND "))
}

// keyArgs decodes an encoded key into its values.
func keyArgs(t Table, key string) []any {
	b := []byte(key)
	out := make([]any, 0, len(t.Key))
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if n == ^uint32(0) {
			out = append(out, nil)
			continue
		}
		out = append(out, string(b[:n]))
		b = b[n:]
	}
	return out
}

// writer pipelines statements to a database in bounded batches.
type writer struct {
	db     *db.DB
	batch  *pgx.Batch
	bytes  int
	report func(int64)
}

func newWriter(d *db.DB, report func(int64)) *writer {
	return &writer{db: d, batch: &pgx.Batch{}, report: report}
}

func (w *writer) add(sql string, args []any, n int) {
	w.batch.Queue(sql, args...)
	w.bytes += n
}

func (w *writer) full() bool { return w.batch.Len() >= batchRows || w.bytes >= batchBytes }

// flush sends the batch as one transaction.
func (w *writer) flush(ctx context.Context) error {
	if w.batch.Len() == 0 {
		return nil
	}
	n := w.batch.Len()
	b := w.batch
	w.batch, w.bytes = &pgx.Batch{}, 0
	err := w.db.Tx(ctx, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, b)
		for range n {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
	})
	if err == nil {
		w.report(int64(n))
	}
	return err
}

// deleteWorkspace deletes every row of ws from the workspace-owned tables of d, children first,
// in bounded batches.
func deleteWorkspace(ctx context.Context, d *db.DB, s Schema, ws string) error {
	for i := len(s.Tables) - 1; i >= 0; i-- {
		t := s.Tables[i]
		keys := make([]string, len(t.Key))
		for j, k := range t.Key {
			keys[j] = quote(k)
		}
		k := strings.Join(keys, ", ")
		sql := fmt.Sprintf(`DELETE FROM %s WHERE (%s) IN (SELECT %s FROM %s WHERE workspace_id = $1 LIMIT 1000)`, quote(t.Name), k, k, quote(t.Name))
		for {
			tag, err := d.Exec(ctx, sql, ws)
			if err != nil {
				return fmt.Errorf("delete from %s: %w", t.Name, err)
			}
			if tag.RowsAffected() == 0 {
				break
			}
		}
	}
	return nil
}
