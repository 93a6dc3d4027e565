package webhook

// RefusedAddress is refusedAddress, for the tests.
var RefusedAddress = refusedAddress
