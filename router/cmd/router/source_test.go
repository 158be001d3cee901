package main

import (
	"context"
	"testing"

	"slidecells/router"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
)

// TestDirectorySourceCarriesPreviewURLs: the router's cell table gets each cell's preview host
// from the directory (migration 0002).
func TestDirectorySourceCarriesPreviewURLs(t *testing.T) {
	ctx := context.Background()
	d, err := directory.Open(ctx, dbtest.NewDatabase(t, nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.AddCell(ctx, directory.Cell{ID: "cell-a", InternalURL: "http://10.0.0.1:8081", PreviewURL: "http://10.0.0.1:8082/"}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddCell(ctx, directory.Cell{ID: "cell-b", InternalURL: "http://10.0.0.2:8081"}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddCell(ctx, directory.Cell{ID: "cell-c", InternalURL: "http://10.0.0.3:8081", PreviewURL: "http://10.0.0.3:8082/prefix"}); err == nil {
		t.Fatal("a preview URL with a path was accepted")
	}
	cells, err := directorySource{d}.Cells(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []router.Cell{
		{ID: "cell-a", URL: "http://10.0.0.1:8081", State: router.CellActive, PreviewURL: "http://10.0.0.1:8082"},
		{ID: "cell-b", URL: "http://10.0.0.2:8081", State: router.CellActive},
	}
	if len(cells) != len(want) || cells[0] != want[0] || cells[1] != want[1] {
		t.Fatalf("cells = %+v, want %+v", cells, want)
	}
	if err := d.SetCellPreviewURL(ctx, "cell-b", "https://preview-b:8443"); err != nil {
		t.Fatal(err)
	}
	if c, err := d.Cell(ctx, "cell-b"); err != nil || c.PreviewURL != "https://preview-b:8443" {
		t.Fatalf("cell-b = %+v, %v", c, err)
	}
}
