package api

// paginate turns rows fetched with limit+1 into one page of views and the cursor of the next
// page ("" on the last page): the extra row only says that more exist.
func paginate[T, V any](rows []T, limit int, cursor func(T) string, view func(T) V) ([]V, string) {
	items := make([]V, 0, min(len(rows), limit))
	for i, r := range rows {
		if i == limit {
			return items, cursor(rows[i-1])
		}
		items = append(items, view(r))
	}
	return items, ""
}
