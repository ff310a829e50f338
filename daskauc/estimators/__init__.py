"""scikit-learn estimators over daskauc's solvers, and the papers' presets."""
