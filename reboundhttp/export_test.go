package reboundhttp

// NeverSent is the test's name of neverSent.
var NeverSent = neverSent

// DefaultClassifier is the test's name of defaultClassifier.
var DefaultClassifier = defaultClassifier
