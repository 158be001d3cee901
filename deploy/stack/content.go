package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// DemoContent is what SeedContent made in one demo workspace.
type DemoContent struct {
	ProjectID string            `json:"project_id"`
	Pages     map[string]string `json:"pages"` // page key → page ID
}

// demoProject is the name of the demo project in each demo workspace.
const demoProject = "Demo deck"

// demoPages are the demo project's pages, by key: a title slide and a chart, made of the
// preview host's kit (cell/preview/runtime/src/kit). The chart's column is 700 px for its
// 680 px chart (Columns widths are CSS lengths: "2fr" was no flex basis, so the chart's column
// shrank and its last bar ran into the text column — GRAPHIC_OVERLAP and
// CONTENT_OUTSIDE_CONTAINER); the text takes the rest.
var demoPages = []struct{ key, title, source string }{
	{"title", "Title", `import { Slide, Stack } from "@kit/layout";
import { Title, Body, Caption } from "@kit/text";
export default function TitleSlide() {
  return (
    <Slide>
      <Stack gap={24}>
        <Title>Quarterly review</Title>
        <Body>Revenue grew in every region; the new product line doubled its share.</Body>
        <Caption>Demo page seeded by make run</Caption>
      </Stack>
    </Slide>
  );
}`},
	{"chart", "Revenue by quarter", `import { Slide, Columns } from "@kit/layout";
import { Heading, Body } from "@kit/text";
import { BarChart } from "@kit/chart";
const revenue = [{ label: "Q1", value: 12 }, { label: "Q2", value: 17 }, { label: "Q3", value: 21 }, { label: "Q4", value: 26 }];
export default function RevenueSlide() {
  return (
    <Slide>
      <Heading>Revenue by quarter</Heading>
      <Columns widths={[700]}>
        <BarChart data={revenue} width={680} height={440} title="Revenue (M€)" />
        <Body>Up 117 % over the year, every quarter above the last.</Body>
      </Columns>
    </Slide>
  );
}`},
}

// SeedContent gives a demo workspace a project with the demo pages, through the router's
// public API as any client would (pages are made by mutation jobs, each awaited). What exists
// already, by project name and page key, is kept, so a second run changes nothing.
func (s *Stack) SeedContent(ctx context.Context, pat, workspace string) (DemoContent, error) {
	c := apiClient{base: s.RouterURL, pat: pat, ws: workspace, http: &http.Client{Timeout: 30 * time.Second}}
	var out DemoContent
	var projects struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/projects?limit=200", nil, http.StatusOK, &projects); err != nil {
		return out, err
	}
	for _, p := range projects.Items {
		if p.Name == demoProject {
			out.ProjectID = p.ID
		}
	}
	if out.ProjectID == "" {
		var p struct{ ID string }
		if err := c.do(ctx, http.MethodPost, "/api/v1/projects", map[string]string{"name": demoProject}, http.StatusCreated, &p); err != nil {
			return out, err
		}
		out.ProjectID = p.ID
	}
	var pages struct {
		Items []struct{ ID, Key string } `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/projects/"+out.ProjectID+"/pages?limit=200", nil, http.StatusOK, &pages); err != nil {
		return out, err
	}
	out.Pages = map[string]string{}
	for _, p := range pages.Items {
		out.Pages[p.Key] = p.ID
	}
	for _, p := range demoPages {
		if out.Pages[p.key] != "" {
			continue
		}
		var job struct {
			JobID string `json:"job_id"`
		}
		body := map[string]string{"project_id": out.ProjectID, "key": p.key, "title": p.title, "file_type": "tsx", "source": p.source}
		if err := c.do(ctx, http.MethodPost, "/api/v1/pages", body, http.StatusAccepted, &job); err != nil {
			return out, err
		}
		id, err := c.await(ctx, job.JobID)
		if err != nil {
			return out, fmt.Errorf("demo page %s: %w", p.key, err)
		}
		out.Pages[p.key] = id
	}
	return out, nil
}

// apiClient calls the public API in one workspace with a PAT.
type apiClient struct {
	base, pat, ws string
	http          *http.Client
}

// do sends a request (POSTs with a fresh Idempotency-Key) and decodes an answer of status want.
func (c apiClient) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.pat)
	req.Header.Set("X-Workspace-ID", c.ws)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "demo-"+url.PathEscape(path)+"-"+fmt.Sprint(time.Now().UnixNano()))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// await polls a mutation job until it ends (at most two minutes) and returns the object it made.
func (c apiClient) await(ctx context.Context, jobID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		var j struct {
			Status string `json:"status"`
			Result struct {
				ObjectID string `json:"object_id"`
			} `json:"result"`
			ErrorCode    string `json:"error_code"`
			ErrorMessage string `json:"error_message"`
		}
		if err := c.do(ctx, http.MethodGet, "/api/v1/jobs/mutations/"+jobID, nil, http.StatusOK, &j); err != nil {
			return "", err
		}
		switch j.Status {
		case "succeeded":
			return j.Result.ObjectID, nil
		case "failed", "canceled":
			return "", fmt.Errorf("job %s %s: %s %s", jobID, j.Status, j.ErrorCode, j.ErrorMessage)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("job %s: still %s: %w", jobID, j.Status, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
