package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/formation"
)

func TestFormationsListsEveryFormationWithDurabilityAndContract(t *testing.T) {
	formations := func(format string) result {
		return call(t, "", func(ctx context.Context, io IOStreams) error {
			return runFormations(ctx, &FormationsOptions{IO: io, Format: format})
		})
	}
	r := formations("json")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	var rows []formationRow
	if err := json.Unmarshal(listOf(t, r.stdout, "formations"), &rows); err != nil {
		t.Fatal(err)
	}
	durable := map[string]bool{}
	// Every option of every formation is listed as the registry has it: the same names in the same
	// order, each with its default, range and durability.
	for _, row := range rows {
		f, err := formation.Lookup(row.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(row.Options) != len(f.Options) || len(f.Options) == 0 {
			t.Fatalf("%s: %d options listed, the registry has %d", row.Name, len(row.Options), len(f.Options))
		}
		for i, o := range f.Options {
			got := row.Options[i]
			if got.Name != o.Name || got.Default != o.Default || got.Range != o.Range || got.Durable != o.Durable || got.Doc != o.Doc {
				t.Fatalf("%s option %d: listed %+v, registry %s default %q range %q durable %v", row.Name, i, got, o.Name, o.Default, o.Range, o.Durable)
			}
		}
	}
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
	table := formations("table")
	if table.code != 0 || !strings.Contains(table.stdout, "DURABLE") || !strings.Contains(table.stdout, `{"vote_key":"...","answer":"..."}`) {
		t.Fatalf("table:\n%s", table.stdout)
	}
	// The ensemble modes after the table are the registry's, each with its contract.
	for _, m := range formation.EnsembleModes() {
		if !strings.Contains(table.stdout, m.Name) || !strings.Contains(table.stdout, m.Doc) {
			t.Errorf("the table does not give ensemble mode %s with its contract:\n%s", m.Name, table.stdout)
		}
	}
	for _, want := range []string{"consensus_threshold*=0.7 ((0.5,1])", "conversation_max_turns=6 (1..100)", "stricter than the seed"} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("the table does not list %q:\n%s", want, table.stdout)
		}
	}
	if bad := formations("xml"); bad.code != 2 {
		t.Errorf("--format xml: exit %d", bad.code)
	}
}
