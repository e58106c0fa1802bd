package collect

func init() { register("defenses", TierMedium, newDefensesCollector) }
