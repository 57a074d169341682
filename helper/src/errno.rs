//! errno names for policies (`errno:EPERM`) and for messages printed after the
//! seccomp filter is installed, where formatting must not allocate.

const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("ESRCH", libc::ESRCH),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("ENOEXEC", libc::ENOEXEC),
    ("EBADF", libc::EBADF),
    ("ECHILD", libc::ECHILD),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ENOTTY", libc::ENOTTY),
    ("ETXTBSY", libc::ETXTBSY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("EPIPE", libc::EPIPE),
    ("ERANGE", libc::ERANGE),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOSYS", libc::ENOSYS),
    ("ELOOP", libc::ELOOP),
    ("ENOTSUP", libc::ENOTSUP),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("EADDRINUSE", libc::EADDRINUSE),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("ENETUNREACH", libc::ENETUNREACH),
    ("ETIMEDOUT", libc::ETIMEDOUT),
];

/// errno number for a name such as `EPERM`; `EOPNOTSUPP` is accepted as an alias.
pub fn number(name: &str) -> Option<u16> {
    let name = if name == "EOPNOTSUPP" {
        "ENOTSUP"
    } else {
        name
    };
    ERRNOS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v as u16)
}

/// Name of an errno number, if it is one of the common ones.
pub fn name(n: u16) -> Option<&'static str> {
    ERRNOS
        .iter()
        .find(|(_, v)| *v as u16 == n)
        .map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        assert_eq!(super::number("EPERM"), Some(1));
        assert_eq!(super::number("ENOSYS"), Some(38));
        assert_eq!(super::name(13), Some("EACCES"));
        assert_eq!(super::number("EOPNOTSUPP"), super::number("ENOTSUP"));
        assert_eq!(super::number("EWHAT"), None);
    }
}
