package controller

// ValidTopicName applies Kafka's rules for a topic name (Topic.validate):
// 1-249 characters of [a-zA-Z0-9._-], not "." or "..". Every name that
// reaches a broker, from a client or in a controller's request, passes it
// before it names a directory or a znode.
func ValidTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
