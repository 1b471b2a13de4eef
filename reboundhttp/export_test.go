package reboundhttp

// NeverSent is the test's name of neverSent.
var NeverSent = neverSent
