package harness

// The documented defaults of the formation contracts (FORMATIONS.md, and each formation's Doc in the
// registry), as the harness holds them. A rule re-derives with these, never with the runtime's own
// constants: a runtime whose defaults drifted is contradicted, not followed. A test pins them against
// the registry's documentation today (TestContractDefaultsMatchTheDocumentedOnes).
const (
	defaultConsensusRounds      = 3
	defaultConsensusThreshold   = 0.7
	defaultReflectionIterations = 3
	defaultMaxTurns             = 6
	defaultTranscriptMaxChars   = 32768
	defaultDebateRounds         = 2
	defaultMaxAnswerChars       = 8192
	defaultMaxSwitches          = 3
	defaultFanout               = 2
	defaultMaxDepth             = 3
	// defaultMinScore is adaptive's min_score: 1 under error_rate (every member must succeed),
	// 0.5 under the other strategies.
	defaultMinScore          = 0.5
	defaultMinScoreErrorRate = 1
)

// defaultAdaptiveCycle is adaptive's default formation cycle.
func defaultAdaptiveCycle() []string { return []string{"sequential", "hierarchical", "consensus"} }

// roleKeyword is one domain role of dynamic_router's default selector and the task words that
// select it, in the order the roles are checked.
type roleKeyword struct {
	role  string
	words []string
}

func defaultRoleKeywords() []roleKeyword {
	return []roleKeyword{
		{"executor", []string{"implement", "write", "build", "fix", "code", "create"}},
		{"researcher", []string{"research", "investigate", "find", "survey", "compare"}},
		{"reviewer", []string{"review", "audit", "critique", "inspect"}},
	}
}
