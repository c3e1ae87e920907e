package lease

// InactiveFor is inactiveFor, for the decision's own test.
var InactiveFor = inactiveFor
