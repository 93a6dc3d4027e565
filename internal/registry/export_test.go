package registry

// For the external tests: the former, reflective encoding of a spec.
var (
	ReflectiveSpecJSON = reflectiveSpecJSON
	ReflectiveChatJSON = reflectiveChatJSON
)
