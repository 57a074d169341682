//! Network probes. Stream probes count as ALLOWED only when the listener's
//! banner is read (a connect that completes but yields no banner within 3 s
//! is a setup error: something other than the test's listener answered).
//!
//! Host safety: one connection or one datagram to the address given; HOST
//! must be an IP address (or `localhost`), never resolved through DNS.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
use std::time::Duration;

use crate::{arg, Outcome, ProbeResult, Setup};

const TIMEOUT: Duration = Duration::from_secs(3);

fn sockaddr(args: &[String]) -> Result<SocketAddr, Setup> {
    let host = arg(args, 0, "HOST")?;
    let port: u16 = arg(args, 1, "PORT")?
        .parse()
        .map_err(|_| Setup(format!("bad port {:?}", args[1])))?;
    let ip: IpAddr = if host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse()
            .map_err(|_| Setup(format!("HOST must be an IP address, got {host:?}")))?
    };
    Ok(SocketAddr::new(ip, port))
}

/// Read the banner from a connected stream.
fn banner(mut s: impl Read, what: &str) -> ProbeResult {
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(n) if n > 0 => {
            let text = String::from_utf8_lossy(&buf[..n]);
            let line = text.lines().next().unwrap_or("").to_string();
            Ok(Outcome::Allowed(format!("{what}: banner {line:?}")))
        }
        Ok(_) => Err(Setup(format!(
            "{what}: connected but the peer closed without a banner"
        ))),
        Err(e) => Err(Setup(format!("{what}: connected but no banner: {e}"))),
    }
}

/// `tcp-connect HOST PORT`: connect and read the banner.
pub(crate) fn tcp_connect(args: &[String]) -> ProbeResult {
    let addr = sockaddr(args)?;
    let s = match TcpStream::connect_timeout(&addr, TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Ok(Outcome::from_io(&e, format!("connect tcp {addr}"))),
    };
    s.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| Setup(format!("SO_RCVTIMEO: {e}")))?;
    banner(s, &format!("tcp {addr}"))
}

/// `udp-send HOST PORT`: send one datagram `cordon-probe-udp\n`. ALLOWED when
/// the kernel accepted the whole datagram (the test's listener checks receipt).
pub(crate) fn udp_send(args: &[String]) -> ProbeResult {
    let addr = sockaddr(args)?;
    let local = if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let sock = match UdpSocket::bind(local) {
        Ok(s) => s,
        Err(e) => return Ok(Outcome::from_io(&e, "udp socket/bind")),
    };
    let msg = b"cordon-probe-udp\n";
    match sock.send_to(msg, addr) {
        Ok(n) if n == msg.len() => Ok(Outcome::Allowed(format!("sent {n} bytes to udp {addr}"))),
        Ok(n) => Err(Setup(format!("short UDP send: {n} bytes"))),
        Err(e) => Ok(Outcome::from_io(&e, format!("sendto udp {addr}"))),
    }
}

/// `unix-connect PATH`: connect to a UNIX stream socket and read the banner.
pub(crate) fn unix_connect(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let s = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) => return Ok(Outcome::from_io(&e, format!("connect unix {path}"))),
    };
    s.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| Setup(format!("SO_RCVTIMEO: {e}")))?;
    banner(s, &format!("unix {path}"))
}

/// `abstract-connect NAME`: connect to the abstract UNIX socket `\0NAME` and
/// read the banner.
pub(crate) fn abstract_connect(args: &[String]) -> ProbeResult {
    let name = arg(args, 0, "NAME")?;
    let addr = UnixAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| Setup(format!("abstract name {name:?}: {e}")))?;
    let s = match UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e) => return Ok(Outcome::from_io(&e, format!("connect abstract @{name}"))),
    };
    s.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| Setup(format!("SO_RCVTIMEO: {e}")))?;
    banner(s, &format!("abstract @{name}"))
}
