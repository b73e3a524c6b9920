/// Every subset of `size` elements of 0..<n, as ascending index arrays.
public func subsets(of n: Int, size: Int) -> [[Int]] {
    guard size > 0 else { return [[]] }
    guard n >= size else { return [] }
    return subsets(of: n - 1, size: size) + subsets(of: n - 1, size: size - 1).map { $0 + [n - 1] }
}
