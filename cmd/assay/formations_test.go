package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFormationsListsEveryFormationWithDurabilityAndContract(t *testing.T) {
	r := runCLI(t, "formations", "--format", "json")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	var rows []formationRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatal(err)
	}
	durable := map[string]bool{}
	for _, row := range rows {
		durable[row.Name] = row.Durable
		if row.Doc == "" {
			t.Fatalf("%s has no contract text", row.Name)
		}
	}
	want := map[string]bool{"sequential": true, "pipeline": true, "parallel": true, "hierarchical": true, "consensus": true, "reflection": true,
		"dynamic_router": false, "multi_level_hierarchy": false, "adaptive": false, "group_chat": false, "debate": false, "handoff": false}
	if len(rows) != len(want) {
		t.Fatalf("%d formations listed, want %d", len(rows), len(want))
	}
	for name, d := range want {
		if got, ok := durable[name]; !ok || got != d {
			t.Fatalf("%s: listed %v durable %v, want durable %v", name, ok, got, d)
		}
	}
	table := runCLI(t, "formations")
	if table.code != 0 || !strings.Contains(table.stdout, "DURABLE") || !strings.Contains(table.stdout, "ensemble") {
		t.Fatalf("table:\n%s", table.stdout)
	}
}
