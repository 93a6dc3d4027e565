package loop

import "testing"

func TestRenderReview(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"plain text is the review", "Looks fine to me.\n", "Looks fine to me."},
		{"no findings", `{"findings":[],"overall_correctness":"patch is correct","overall_explanation":"No issues."}`, "No issues."},
		{"two findings, JSON after words", `Here: {"findings":[` +
			`{"title":"[P0] A","body":"a","code_location":{"absolute_file_path":"/x.go","line_range":{"start":1,"end":1}}},` +
			`{"title":"[P2] B","body":"b","code_location":{"absolute_file_path":"/y.go","line_range":{"start":3,"end":4}}}],"overall_explanation":""}`,
			"Review comments:\n\n- [P0] A — /x.go:1-1\n  a\n- [P2] B — /y.go:3-4\n  b"},
		{"empty", "", "The reviewer gave no findings and no explanation."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderReview(parseReview(tc.answer)); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
